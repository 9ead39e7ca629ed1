/**
 * `glob`: file paths under a directory matching a glob (see glob-match.ts for the syntax),
 * matched against the whole path relative to the search directory. Order: each directory's
 * files (sorted by name) before its subdirectories (sorted, depth-first).
 * Files only; skips `.git` and `node_modules`. Pure Node, run in a worker thread.
 */
import * as A from "../../core/arg-schema.js";
import { defineLocalTool } from "./define.js";
import { compileGlob, MAX_GLOB_PATTERN_CHARS } from "./glob-match.js";
import { describeError, fail, ok } from "./result.js";
import { runSearch } from "./search.js";
import { boundNotes, displayPath, resolveRoot, SEARCH_MAX_ENTRIES, SEARCH_TIMEOUT_MS, searchFailure } from "./search-tool-common.js";

export const GLOB_DEFAULT_LIMIT = 500;
export const GLOB_MAX_LIMIT = 5000;

const GlobArgs = A.object({
  pattern: A.string({ min: 1, max: MAX_GLOB_PATTERN_CHARS, description: "Glob matched against paths relative to `path`: `**` spans directories, `*` and `?` stay within one, `{a,b}` alternatives. Use `**/*.ts` to search recursively." }),
  path: A.optional(A.string({ min: 1, description: "Directory to search. Default: the working directory." })),
  limit: A.optional(A.number({ integer: true, min: 1, max: GLOB_MAX_LIMIT, description: `Maximum paths. Default ${GLOB_DEFAULT_LIMIT}.` })),
});

export const globTool = defineLocalTool({
  name: "glob",
  risk: "read_only",
  description: "Find files whose path matches a glob pattern (e.g. `src/**/*.{ts,tsx}`). Skips .git and node_modules.",
  schema: GlobArgs,
  async execute(args, ctx) {
    try {
      compileGlob(args.pattern);
    } catch (err) {
      return fail("invalid_arguments", `glob: ${describeError(err)}`);
    }
    const root = await resolveRoot("glob", ctx.cwd, args.path, false);
    if (!root.ok) return root.result;
    const limit = args.limit ?? GLOB_DEFAULT_LIMIT;
    ctx.onProgress("searching");
    const run = await runSearch(
      { op: "glob", root: root.abs, rootIsFile: false, pattern: args.pattern, limit, maxEntries: SEARCH_MAX_ENTRIES },
      ctx.signal,
      SEARCH_TIMEOUT_MS,
    );
    const failure = searchFailure("glob", run);
    if (failure !== null || !run.ok) return failure ?? fail("failed", "glob: failed");
    ctx.onProgress(`${run.results.length} files`);
    if (run.results.length === 0) return ok(`no files match${boundNotes(run, limit, "paths")}`);
    return ok(run.results.map((r) => displayPath(root.display, r)).join("\n") + boundNotes(run, limit, "paths"));
  },
});
