/**
 * The system prompt of a turn: working directory, date, a chat channel's section (when the session has one), the
 * tool list, the skills list (name + description, at most
 * `MAX_SKILLS_SECTION_BYTES`; only when the turn has tools), and project instruction files
 * (`AGENTS.md`, then `CLAUDE.md`) found in the working directory. Contract: each instruction file contributes at
 * most `MAX_INSTRUCTION_BYTES` (cut at a UTF-8 boundary, with a note), the whole prompt at most
 * `MAX_SYSTEM_PROMPT_BYTES`; unreadable or non-regular files are skipped silently (never an error, never a path
 * outside `cwd`).
 * Instruction files are read again only when a synchronous `stat` shows another identity (device, inode, size,
 * modification and change times in ns) than the text kept for that path; a missing file costs that `stat` alone.
 * Text read within `STABLE_AFTER_MS` of the file's last change is not kept (a second same-size rewrite inside one
 * timestamp tick would leave the identity as it was), so an edit always shows at the next turn.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { truncateUtf8 } from "../core/utf8.js";
import type { ToolSpec } from "./types.js";
import { readRegularFileHead } from "./regular-file.js";

export const INSTRUCTION_FILES = ["AGENTS.md", "CLAUDE.md"] as const;
export const MAX_INSTRUCTION_BYTES = 32 * 1024;
export const MAX_SYSTEM_PROMPT_BYTES = 96 * 1024;

async function readBounded(path: string, max: number): Promise<string | null> {
  const head = await readRegularFileHead(path, max + 4);
  if (head === null) return null;
  const text = head.bytes.toString("utf8");
  return head.size > max ? truncateUtf8(text, max) + "\n[… instructions truncated …]" : text;
}

/** See the module contract. */
export const STABLE_AFTER_MS = 100;
/** Instruction files whose text is kept (more: all are dropped and kept again as read). */
const MAX_KEPT_FILES = 256;
const kept = new Map<string, { key: string; text: string | null }>();

/** `now` (ms): the turn's clock, against which a file's last change is judged stable. */
async function readInstructions(path: string, now: number): Promise<string | null> {
  let st;
  try {
    st = statSync(path, { bigint: true, throwIfNoEntry: false });
  } catch {
    return null;
  }
  if (st === undefined || !st.isFile()) {
    kept.delete(path);
    return null;
  }
  const key = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
  const hit = kept.get(path);
  if (hit !== undefined && hit.key === key) return hit.text;
  const text = await readBounded(path, MAX_INSTRUCTION_BYTES);
  const changedMs = Number((st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs) / 1_000_000n);
  if (now - changedMs > STABLE_AFTER_MS) {
    if (kept.size >= MAX_KEPT_FILES) kept.clear();
    kept.set(path, { key, text });
  } else kept.delete(path);
  return text;
}

export interface SystemPromptOptions {
  cwd: string;
  now: Date;
  tools: readonly ToolSpec[];
  /** A chat channel's name: adds the chat-channel section. */
  channel?: string;
  /** Discovered skills (name + description), listed for the model to open with `read_skill`. */
  skills?: readonly { name: string; description: string }[];
}

/** Largest skills section (bytes); entries past it are left out with a count. */
export const MAX_SKILLS_SECTION_BYTES = 16 * 1024;

function skillsSection(skills: readonly { name: string; description: string }[]): string {
  const head = "Skills (call read_skill with a name to read its instructions before doing a task it covers):";
  let out = head;
  let listed = 0;
  for (const s of skills) {
    const line = `\n- ${s.name}: ${s.description}`;
    if (Buffer.byteLength(out) + Buffer.byteLength(line) > MAX_SKILLS_SECTION_BYTES - 64) break;
    out += line;
    listed++;
  }
  if (listed < skills.length) out += `\n(${skills.length - listed} more skills not listed)`;
  return out;
}

export async function buildSystemPrompt(o: SystemPromptOptions): Promise<string> {
  const parts: string[] = [
    "You are Berth, a coding agent working in the user's project. Use the tools to inspect and change files and run commands; keep answers concise.",
    `Working directory: ${o.cwd}`,
    `Date: ${o.now.toISOString().slice(0, 10)}`,
  ];
  if (o.channel !== undefined)
    parts.push(
      `Chat channel: you are talking with the user through ${o.channel}. They read short plain-text chat messages: no Markdown tables or long code blocks. Only the last message of each turn reaches them, and they never see tool calls or their output, so put everything they need in that last message.`,
    );
  parts.push(o.tools.length > 0 ? `Tools: ${o.tools.map((t) => t.name).join(", ")}` : "No tools are available in this session.");
  if (o.tools.length > 0 && o.skills !== undefined && o.skills.length > 0) parts.push(skillsSection(o.skills));
  for (const name of INSTRUCTION_FILES) {
    const text = await readInstructions(join(o.cwd, name), o.now.getTime());
    if (text !== null && text.trim() !== "") parts.push(`Project instructions (${name}):\n${text}`);
  }
  return truncateUtf8(parts.join("\n\n"), MAX_SYSTEM_PROMPT_BYTES);
}
