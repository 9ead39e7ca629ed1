/**
 * The system prompt of a turn: working directory, date, the tool list, and project instruction files
 * (`AGENTS.md`, then `CLAUDE.md`) found in the working directory. Contract: each instruction file contributes at
 * most `MAX_INSTRUCTION_BYTES` (cut at a UTF-8 boundary, with a note), the whole prompt at most
 * `MAX_SYSTEM_PROMPT_BYTES`; unreadable or non-regular files are skipped silently (never an error, never a path
 * outside `cwd`).
 */
import { open } from "node:fs/promises";
import { join } from "node:path";
import { truncateUtf8 } from "../core/utf8.js";
import type { ToolSpec } from "./types.js";

export const INSTRUCTION_FILES = ["AGENTS.md", "CLAUDE.md"] as const;
export const MAX_INSTRUCTION_BYTES = 32 * 1024;
export const MAX_SYSTEM_PROMPT_BYTES = 96 * 1024;

async function readBounded(path: string, max: number): Promise<string | null> {
  let fh;
  try {
    fh = await open(path, "r");
  } catch {
    return null;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return null;
    const buf = Buffer.alloc(Math.min(st.size, max + 4));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const text = buf.subarray(0, bytesRead).toString("utf8");
    return st.size > max ? truncateUtf8(text, max) + "\n[… instructions truncated …]" : text;
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

export interface SystemPromptOptions {
  cwd: string;
  now: Date;
  tools: readonly ToolSpec[];
  /** A chat channel's name: adds the chat-channel section. */
  channel?: string;
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
  for (const name of INSTRUCTION_FILES) {
    const text = await readBounded(join(o.cwd, name), MAX_INSTRUCTION_BYTES);
    if (text !== null && text.trim() !== "") parts.push(`Project instructions (${name}):\n${text}`);
  }
  return truncateUtf8(parts.join("\n\n"), MAX_SYSTEM_PROMPT_BYTES);
}
