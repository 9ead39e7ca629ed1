/**
 * `grep`: JavaScript regular-expression search over file contents under a path (or one file).
 * Pure Node, run in a worker thread so a slow regex cannot stall the host; no external binary is
 * used. Skips `.git`, `node_modules`, binary files and files over 10 MiB. Output lines are
 * `path:line: text`, bounded by `limit` matches.
 */
import { defineLocalTool } from "./define.js";
import { fail, ok } from "./result.js";
import { runSearch } from "./search.js";
import { GREP_DEF, GREP_DEFAULT_LIMIT, GREP_MAX_LIMIT } from "./specs.js";
import { boundNotes, displayPath, resolveRoot, SEARCH_MAX_ENTRIES, SEARCH_TIMEOUT_MS, searchFailure } from "./search-tool-common.js";

export { GREP_DEFAULT_LIMIT, GREP_MAX_LIMIT };


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
    if (run.results.length === 0) return ok(`no matches${boundNotes(run, limit, "matches")}`);
    const lines = run.results.map((r) => {
      const [rel = "", line = "", text = ""] = r.split("\u0000");
      return `${displayPath(root.display, rel) || "."}:${line}: ${text}`;
    });
    return ok(lines.join("\n") + boundNotes(run, limit, "matches"));
  },
});
