/** Shared parts of `grep` and `glob`: resolving the search root and mapping a search run to a result. */
import { stat } from "node:fs/promises";
import { posix } from "node:path";
import type { ToolContext, ToolResult } from "../types.js";
import { resolveForTool, rootsFor } from "./confine.js";
import { fail, fsFail } from "./result.js";
import type { SearchRun } from "./search.js";

/** Directory entries a single search visits at most. */
export const SEARCH_MAX_ENTRIES = 200_000;
/** Wall-clock limit of one search. */
export const SEARCH_TIMEOUT_MS = 30_000;

/**
 * `roots`: the call's policy for files reached through symlinks during the walk (a symlink leading outside the
 * allowed roots, or into a refused one, is skipped by the worker).
 */
export type Root =
  | { ok: true; abs: string; isFile: boolean; display: string; roots: { allowed: string[]; denied: string[]; confine: boolean } }
  | { ok: false; result: ToolResult };

/** `display` is the prefix shown on result paths: the path as the model gave it (empty for cwd). */
export async function resolveRoot(tool: string, ctx: ToolContext, path: string | undefined, allowFile: boolean): Promise<Root> {
  const given = path ?? ".";
  const target = await resolveForTool(tool, ctx, given, "read");
  if (!target.ok) return target;
  const abs = target.path;
  try {
    const st = await stat(abs);
    if (!st.isDirectory() && !(allowFile && st.isFile())) {
      return { ok: false, result: fail("failed", `${tool}: ${given} is not ${allowFile ? "a directory or a regular file" : "a directory"}`) };
    }
    const display = given === "." || given === "./" ? "" : given.replace(/\\/g, "/");
    const r = await rootsFor(ctx);
    const roots = { allowed: r.allowed, denied: [...r.secret, ...(r.confine ? r.protectedRoots : [])], confine: r.confine };
    return { ok: true, abs, isFile: !st.isDirectory(), display, roots };
  } catch (err) {
    return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
}

/** Joins the display prefix and a walk-relative path (`rel` is "" for a file root). */
export function displayPath(display: string, rel: string): string {
  if (rel === "") return display;
  return display === "" ? rel : posix.join(display, rel);
}

/** Non-success runs → results; `null` means the run succeeded and the caller formats it. */
export function searchFailure(tool: string, run: SearchRun): ToolResult | null {
  if (run.ok) return null;
  if ("aborted" in run) return fail("cancelled", `${tool}: cancelled`);
  if ("timedOut" in run) return fail("limit", `${tool}: stopped after ${SEARCH_TIMEOUT_MS / 1000} s; narrow the path or pattern`, { timedOut: true });
  return fail("failed", `${tool}: ${run.message}`);
}

/** Trailing notes about bounds that were hit, one line each; `display` names the directory where the walk stopped. */
export function boundNotes(run: { limited: boolean; walkTruncated: boolean; stoppedIn?: string; visited: number }, limit: number, unit: string, display = ""): string {
  const notes: string[] = [];
  if (run.limited) notes.push(`[stopped at ${limit} ${unit}; raise limit or narrow the search]`);
  if (run.walkTruncated) {
    const where = run.stoppedIn !== undefined ? ` (it was reading ${displayPath(display, run.stoppedIn) || "."}/)` : "";
    notes.push(`[search stopped after visiting ${SEARCH_MAX_ENTRIES} entries${where}; results are incomplete; narrow the path]`);
  }
  return notes.length > 0 ? `\n${notes.join("\n")}` : "";
}

/** First names of a list with a count of the rest: `a, b, c and 4 more`. */
function named(names: readonly string[], count: number, display: string): string {
  const shown = names.map((n) => displayPath(display, n)).join(", ");
  return count > names.length ? `${shown} and ${count - names.length} more` : shown;
}

/** glob's notes on symlinks it did not list as files (see `SearchOutcome.links`). */
export function linkNotes(links: { dirs: number; dirNames: string[]; broken: number; brokenNames: string[] } | undefined, display: string): string {
  if (links === undefined) return "";
  const notes: string[] = [];
  if (links.dirs > 0) notes.push(`[not followed: symlinked director${links.dirs === 1 ? "y" : "ies"} ${named(links.dirNames, links.dirs, display)}; pass one as path to search it]`);
  if (links.broken > 0) notes.push(`[not listed: symlink${links.broken === 1 ? "" : "s"} leading to no file (dangling, looping or special) ${named(links.brokenNames, links.broken, display)}]`);
  return notes.length > 0 ? `\n${notes.join("\n")}` : "";
}
