/**
 * `grep`: JavaScript regular-expression search over file contents under a path (or one file).
 * Pure Node, run in a worker thread so a slow regex cannot stall the host; no external binary is
 * used. Skips `.git`, `node_modules`, binary files and files over 10 MiB. Output lines are
 * `path:line: text`, bounded by `limit` matches.
 */
import * as A from "../../core/arg-schema.js";
import { defineLocalTool } from "./define.js";
import { MAX_GLOB_PATTERN_CHARS } from "./glob-match.js";
import { fail, ok } from "./result.js";
import { runSearch } from "./search.js";
import { boundNotes, displayPath, resolveRoot, SEARCH_MAX_ENTRIES, SEARCH_TIMEOUT_MS, searchFailure } from "./search-tool-common.js";

export const GREP_DEFAULT_LIMIT = 100;
export const GREP_MAX_LIMIT = 1000;

const GrepArgs = A.object({
  pattern: A.string({ min: 1, max: 4096, description: "JavaScript regular expression, matched against each line." }),
  path: A.optional(A.string({ min: 1, description: "Directory or file to search. Default: the working directory." })),
  glob: A.optional(A.string({ min: 1, max: MAX_GLOB_PATTERN_CHARS, description: "Only search files matching this glob (e.g. `*.ts`; without a `/` it matches file names at any depth)." })),
  ignore_case: A.optional(A.boolean({ description: "Case-insensitive match." })),
  limit: A.optional(A.number({ integer: true, min: 1, max: GREP_MAX_LIMIT, description: `Maximum matches. Default ${GREP_DEFAULT_LIMIT}.` })),
});

export const grepTool = defineLocalTool({
  name: "grep",
  risk: "read_only",
  description:
    "Search file contents with a JavaScript regular expression. Returns `path:line: text` lines. Skips .git, node_modules and binary files.",
  schema: GrepArgs,
  async execute(args, ctx) {
    try {
      new RegExp(args.pattern, args.ignore_case === true ? "i" : "");
    } catch (err) {
      return fail("invalid_arguments", `grep: invalid regular expression: ${err instanceof Error ? err.message : String(err)}`);
    }
    const root = await resolveRoot("grep", ctx.cwd, args.path, true);
    if (!root.ok) return root.result;
    const limit = args.limit ?? GREP_DEFAULT_LIMIT;
    ctx.onProgress("searching");
    const run = await runSearch(
      {
        op: "grep",
        root: root.abs,
        rootIsFile: root.isFile,
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
