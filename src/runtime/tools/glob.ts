/**
 * `glob`: file paths under a directory matching a glob (see glob-match.ts for the syntax),
 * matched against the whole path relative to the search directory. Order: each directory's
 * files (sorted by name) before its subdirectories (sorted, depth-first).
 * Files only (regular files and symlinks leading to one); skips `.git` and `node_modules`. A symlink to a directory
 * is not descended (no loops, no escape from the tree) and one leading nowhere (dangling, looping, FIFO…) is not
 * listed: notes name both, so the model knows what was not searched. Pure Node, run in a worker thread.
 */
import { defineLocalTool } from "./define.js";
import { compileGlob } from "./glob-match.js";
import { describeError, fail, ok } from "./result.js";
import { runSearch } from "./search.js";
import { GLOB_DEF, GLOB_DEFAULT_LIMIT, GLOB_MAX_LIMIT } from "./specs.js";
import { boundNotes, displayPath, linkNotes, resolveRoot, SEARCH_MAX_ENTRIES, SEARCH_TIMEOUT_MS, searchFailure } from "./search-tool-common.js";

export { GLOB_DEFAULT_LIMIT, GLOB_MAX_LIMIT };


export const globTool = defineLocalTool({
  ...GLOB_DEF,
  async execute(args, ctx) {
    try {
      compileGlob(args.pattern);
    } catch (err) {
      return fail("invalid_arguments", `glob: ${describeError(err)}`);
    }
    const root = await resolveRoot("glob", ctx, args.path, false);
    if (!root.ok) return root.result;
    const limit = args.limit ?? GLOB_DEFAULT_LIMIT;
    ctx.onProgress("searching");
    const run = await runSearch(
      { op: "glob", root: root.abs, rootIsFile: false, roots: root.roots, pattern: args.pattern, limit, maxEntries: SEARCH_MAX_ENTRIES },
      ctx.signal,
      SEARCH_TIMEOUT_MS,
    );
    const failure = searchFailure("glob", run);
    if (failure !== null || !run.ok) return failure ?? fail("failed", "glob: failed");
    ctx.onProgress(`${run.results.length} files`);
    const notes = boundNotes(run, limit, "paths", root.display) + linkNotes(run.links, root.display);
    if (run.results.length === 0) return ok(`no files match${notes}`);
    return ok(run.results.map((r) => displayPath(root.display, r)).join("\n") + notes);
  },
});
