/**
 * How a Berth tool call looks to an ACP client: kind, title, locations and content. Pure functions of the tool's
 * name, its arguments and the session's cwd.
 *
 * Contracts:
 * - Kinds: read/ls/read_skill → read, edit/write → edit, glob/grep → search, bash → execute, web_fetch → fetch,
 *   task/todo_write → think, anything else (MCP tools) → other.
 * - A successful `todo_write` is also projected as a `plan` update carrying the whole list (ACP's plan replaces the
 *   previous one); its tool call stays an ordinary `think` call so approvals and updates keep their subject.
 * - Locations are absolute (relative paths resolve against the session's cwd, the same rule the tools use).
 * - An edit carries a `diff`: for `edit` the replaced snippet (`old_string` → `new_string`), for `write` the whole
 *   new content with `oldText` omitted (the tool overwrites without reading, so the old content is not known here).
 * - Titles are one line, at most `MAX_TITLE_CHARS` characters.
 */
import { homedir } from "node:os";
import { isAbsolute, resolve } from "node:path";
import type { SessionUpdate, ToolCallContent, ToolCallLocation, ToolKind } from "@agentclientprotocol/sdk";
import { todoEntries } from "../../runtime/tools/todo-write.js";

export const MAX_TITLE_CHARS = 200;

const KINDS: Record<string, ToolKind> = {
  read: "read",
  ls: "read",
  read_skill: "read",
  edit: "edit",
  write: "edit",
  glob: "search",
  grep: "search",
  bash: "execute",
  web_fetch: "fetch",
  task: "think",
  todo_write: "think",
};

export function toolKind(name: string): ToolKind {
  return KINDS[name] ?? "other";
}

/** The tools' own path rule: `~` expands, relative resolves against cwd. */
export function absolutePath(cwd: string, p: string): string {
  if (p === "~") return homedir();
  if (p.startsWith("~/")) return resolve(homedir(), p.slice(2));
  return isAbsolute(p) ? resolve(p) : resolve(cwd, p);
}

const str = (args: Record<string, unknown>, k: string): string | null => (typeof args[k] === "string" ? (args[k]) : null);

function oneLine(s: string): string {
  const line = s.replace(/\s+/g, " ").trim();
  return line.length > MAX_TITLE_CHARS ? `${line.slice(0, MAX_TITLE_CHARS - 1)}…` : line;
}

export function toolTitle(name: string, args: Record<string, unknown>): string {
  const path = str(args, "path");
  switch (name) {
    case "read":
      return oneLine(`Read ${path ?? "file"}`);
    case "ls":
      return oneLine(`List ${path ?? "."}`);
    case "edit":
      return oneLine(`Edit ${path ?? "file"}`);
    case "write":
      return oneLine(`Write ${path ?? "file"}`);
    case "glob":
      return oneLine(`Find files ${str(args, "pattern") ?? ""}`);
    case "grep":
      return oneLine(`Search for ${str(args, "pattern") ?? ""}`);
    case "bash":
      return oneLine(str(args, "command") ?? "Run command");
    case "web_fetch":
      return oneLine(`Fetch ${str(args, "url") ?? ""}`);
    case "task":
      return oneLine(`Delegate: ${str(args, "description") ?? "task"}`);
    case "todo_write":
      return "Update plan";
    default:
      return oneLine(`Use ${name}`);
  }
}

export function toolLocations(name: string, args: Record<string, unknown>, cwd: string): ToolCallLocation[] {
  const path = str(args, "path");
  if (path === null || !["read", "ls", "edit", "write", "glob", "grep"].includes(name)) return [];
  const offset = args["offset"];
  return [{ path: absolutePath(cwd, path), ...(name === "read" && typeof offset === "number" ? { line: offset } : {}) }];
}

/** The diff an edit shows before and after it runs (empty for other tools). */
export function toolDiff(name: string, args: Record<string, unknown>, cwd: string): ToolCallContent[] {
  const path = str(args, "path");
  if (path === null) return [];
  if (name === "edit") {
    const oldText = str(args, "old_string");
    const newText = str(args, "new_string");
    if (oldText === null || newText === null) return [];
    return [{ type: "diff", path: absolutePath(cwd, path), oldText, newText }];
  }
  if (name === "write") {
    const content = str(args, "content");
    return content === null ? [] : [{ type: "diff", path: absolutePath(cwd, path), newText: content }];
  }
  return [];
}

/** A tool's result text as ACP content. */
export function textContent(text: string): ToolCallContent[] {
  return text === "" ? [] : [{ type: "content", content: { type: "text", text } }];
}

/** The `plan` update a successful `todo_write` call implies (null for other tools or arguments the tool refused). */
export function toolPlan(name: string, args: Record<string, unknown>): SessionUpdate | null {
  if (name !== "todo_write") return null;
  const entries = todoEntries(args);
  return entries === null ? null : { sessionUpdate: "plan", entries };
}
