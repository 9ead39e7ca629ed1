/**
 * Approval cards for `berth chat`: what a tool call asking for approval will do, shown before the question.
 * Contract: `write`/`edit` → a unified diff of the file as it is now against the result (read from disk, never
 * written); `bash` → the command and the cwd it runs in; an MCP tool (`mcp__<server>__<tool>`) → server, tool and
 * arguments; anything else → its name, the server's summary and its arguments. Long parts are cut with a note.
 */
import { isAbsolute, resolve } from "node:path";
import { readRegularFile } from "../../store/regular-file.js";
import { unifiedDiff, whyNoDiff } from "./diff.js";

const MAX_CARD_LINES = 80;
const MAX_ARGS_CHARS = 2000;

export interface ApprovalInfo {
  name: string;
  arguments: Record<string, unknown> | null;
  cwd: string;
  summary: string;
  risk: string;
}

/** Files past this size are not read for a card: the diff gives up at MAX_DIFF_LINES lines anyway. */
const MAX_CURRENT_BYTES = 8 * 1024 * 1024;

/** The file as it is now, for the card's diff: `text` null for a missing file, `why` when it cannot be shown. */
async function current(path: string): Promise<{ text: string | null; why?: string }> {
  try {
    // Opened non-blocking and checked first: never a FIFO the model points at (it would wait for a writer).
    return { text: (await readRegularFile(path, MAX_CURRENT_BYTES)).toString("utf8") };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { text: null };
    if (code === "ENOTREG") return { text: null, why: "not a regular file: the tool will refuse it" };
    if (code === "EISDIR") return { text: null, why: "a directory: the tool will refuse it" };
    if (code === "EFBIG") return { text: null, why: "too large to diff" };
    return { text: null, why: `cannot be read now${typeof code === "string" && /^E[A-Z]{1,15}$/.test(code) ? ` (${code})` : ""}` };
  }
}

function clip(text: string, maxLines = MAX_CARD_LINES): string {
  const l = text.replace(/\n$/, "").split("\n");
  if (l.length <= maxLines) return l.join("\n");
  return [...l.slice(0, maxLines), `… ${l.length - maxLines} more lines`].join("\n");
}

function argsText(args: Record<string, unknown> | null): string {
  const s = JSON.stringify(args ?? {}, null, 2);
  return s.length > MAX_ARGS_CHARS ? s.slice(0, MAX_ARGS_CHARS) + "\n… (arguments cut)" : s;
}

/** `mcp__server__tool` → `{server, tool}`; anything else → null. */
export function mcpParts(name: string): { server: string; tool: string } | null {
  const m = /^mcp__(.+?)__(.+)$/.exec(name);
  return m ? { server: m[1]!, tool: m[2]! } : null;
}

/** The card's lines (plain text; the caller styles `+`/`-` lines). */
export async function approvalCard(a: ApprovalInfo): Promise<string> {
  const args = a.arguments ?? {};
  const str = (k: string): string | null => (typeof args[k] === "string" ? (args[k]) : null);
  const path = str("path");
  const abs = path === null ? null : isAbsolute(path) ? path : resolve(a.cwd, path);
  if (a.name === "bash" && str("command") !== null) return `bash in ${a.cwd}\n${clip(`$ ${str("command")!}`, 40)}`;
  if (a.name === "write" && abs !== null && str("content") !== null) {
    const now = await current(abs);
    if (now.why !== undefined) return `write ${path} (over a file that is ${now.why}): ${Buffer.byteLength(str("content")!)} bytes`;
    const before = now.text;
    const d = unifiedDiff(before ?? "", str("content")!, path!);
    const head = `write ${path} (${before === null ? "new file" : "overwrite"})`;
    return d === null ? `${head}: ${Buffer.byteLength(str("content")!)} bytes (${whyNoDiff(before ?? "", str("content")!)})` : `${head}\n${clip(d)}`;
  }
  if (a.name === "edit" && abs !== null && str("old_string") !== null && str("new_string") !== null) {
    const now = await current(abs);
    const oldS = str("old_string")!;
    const newS = str("new_string")!;
    if (now.why !== undefined) return `edit ${path} (the file is ${now.why})\n${clip(`- ${oldS}\n+ ${newS}`)}`;
    const before = now.text;
    if (before === null || !before.includes(oldS)) return `edit ${path} (the text to replace is not in the file now)\n${clip(`- ${oldS}\n+ ${newS}`)}`;
    const after = args["replace_all"] === true ? before.split(oldS).join(newS) : before.replace(oldS, () => newS);
    const d = unifiedDiff(before, after, path!);
    return d === null ? `edit ${path} (${whyNoDiff(before, after)})` : `edit ${path}\n${clip(d)}`;
  }
  const mcp = mcpParts(a.name);
  if (mcp !== null) return `MCP server ${mcp.server} · tool ${mcp.tool}\n${clip(argsText(a.arguments), 30)}`;
  return `${a.name} (${a.risk}): ${a.summary}\n${clip(argsText(a.arguments), 30)}`;
}

/** A short one-line view of a tool call's arguments. */
export function shortArgs(name: string, args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  const pick = typeof a["command"] === "string" ? a["command"] : typeof a["path"] === "string" ? a["path"] : typeof a["pattern"] === "string" ? a["pattern"] : JSON.stringify(a);
  const mcp = mcpParts(name);
  const label = mcp !== null ? `${mcp.server}/${mcp.tool}` : name;
  const one = String(pick).replace(/\s+/g, " ");
  return `${label} ${one.length > 80 ? one.slice(0, 79) + "…" : one}`;
}
