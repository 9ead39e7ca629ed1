/**
 * `grep`: JavaScript regular-expression search over file contents under a path (or one file).
 * Pure Node, run in a worker thread so a slow regex cannot stall the host; no external binary is
 * used. Skips `.git`, `node_modules`, binary files and files over 10 MiB (a note names the large ones; a file named
 * as `path` that would be skipped is an error saying why). Output lines are `path:line: text`, bounded by `limit`
 * matches; a long line shows 500 characters around its first match.
 */
import { defineLocalTool } from "./define.js";
import { fail, ok } from "./result.js";
import { GREP_MAX_FILE_BYTES, runSearch } from "./search.js";
import { GREP_DEF, GREP_DEFAULT_LIMIT, GREP_MAX_LIMIT } from "./specs.js";
import { boundNotes, displayPath, resolveRoot, SEARCH_MAX_ENTRIES, SEARCH_TIMEOUT_MS, searchFailure } from "./search-tool-common.js";

export { GREP_DEFAULT_LIMIT, GREP_MAX_LIMIT };

/** A note naming files not searched for their size (the first three), so "no matches" is not read as "absent". */
function largeNote(display: string, large: ReadonlyArray<{ rel: string }>): string {
  if (large.length === 0) return "";
  const names = large.slice(0, 3).map((f) => displayPath(display, f.rel));
  const more = large.length > 3 ? ` and ${large.length - 3} more` : "";
  return `\n[not searched, over 10 MiB: ${names.join(", ")}${more}; use bash (e.g. grep -n) for them]`;
}


export const grepTool = defineLocalTool({
  ...GREP_DEF,
  async execute(args, ctx) {
    try {
      new RegExp(args.pattern, args.ignore_case === true ? "i" : "");
    } catch (err) {
      return fail("invalid_arguments", `grep: invalid regular expression: ${err instanceof Error ? err.message : String(err)}`);
    }
    const root = await resolveRoot("grep", ctx, args.path, true);
    if (!root.ok) return root.result;
    const limit = args.limit ?? GREP_DEFAULT_LIMIT;
    ctx.onProgress("searching");
    const run = await runSearch(
      {
        op: "grep",
        root: root.abs,
        rootIsFile: root.isFile,
        roots: root.roots,
        pattern: args.pattern,
        ignoreCase: args.ignore_case === true,
        ...(args.glob !== undefined ? { include: args.glob } : {}),
        limit,
        maxEntries: SEARCH_MAX_ENTRIES,
      },
      ctx.signal,
      SEARCH_TIMEOUT_MS,
    );
    const failure = searchFailure("grep", run);
    if (failure !== null || !run.ok) return failure ?? fail("failed", "grep: failed");
    ctx.onProgress(`${run.results.length} matches`);
    const given = args.path ?? ".";
    if (root.isFile && (run.large ?? []).length > 0) {
      const size = run.large?.[0]?.size ?? 0;
      return fail("limit", `grep: ${given} is ${size} bytes, over the ${GREP_MAX_FILE_BYTES} bytes (10 MiB) grep searches; use bash (e.g. grep -n) or read it in pages`);
    }
    if (root.isFile && (run.binary ?? 0) > 0) return fail("failed", `grep: ${given} looks like a binary file (a NUL byte in its first 8 KiB); grep searches text files only`);
    const notes = boundNotes(run, limit, "matches", root.display) + largeNote(root.display, run.large ?? []);
    if (run.results.length === 0) return ok(`no matches${notes}`);
    const lines = run.results.map((r) => {
      const [rel = "", line = "", text = ""] = r.split("\u0000");
      return `${displayPath(root.display, rel) || "."}:${line}: ${text}`;
    });
    return ok(lines.join("\n") + notes);
  },
});
