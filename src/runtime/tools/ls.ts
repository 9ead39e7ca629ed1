/** `ls`: one directory's entries, sorted, directories suffixed with `/`, bounded by `limit`. */
import { readdir } from "node:fs/promises";
import * as A from "../../core/arg-schema.js";
import { defineLocalTool } from "./define.js";
import { resolvePath } from "./paths.js";
import { fsFail, ok } from "./result.js";

export const LS_DEFAULT_LIMIT = 500;
export const LS_MAX_LIMIT = 5000;

const LsArgs = A.object({
  path: A.optional(A.string({ min: 1, description: "Directory to list. Default: the working directory." })),
  limit: A.optional(A.number({ integer: true, min: 1, max: LS_MAX_LIMIT, description: `Maximum entries. Default ${LS_DEFAULT_LIMIT}.` })),
});

export const lsTool = defineLocalTool({
  name: "ls",
  risk: "read_only",
  description: "List a directory's entries (including dotfiles), sorted; directories end with `/`.",
  schema: LsArgs,
  async execute(args, ctx) {
    const dir = resolvePath(ctx.cwd, args.path ?? ".");
    const limit = args.limit ?? LS_DEFAULT_LIMIT;
    let names: string[];
    try {
      const entries = await readdir(dir, { withFileTypes: true });
      names = entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name));
    } catch (err) {
      return fsFail(err, `ls: ${args.path ?? "."}`);
    }
    names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (names.length === 0) return ok("(empty directory)");
    const shown = names.slice(0, limit);
    let body = shown.join("\n");
    if (names.length > limit) body += `\n[${names.length - limit} more entries not shown; raise limit]`;
    return ok(body);
  },
});
