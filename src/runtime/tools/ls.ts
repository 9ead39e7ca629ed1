/** `ls`: one directory's entries, sorted, directories suffixed with `/`, bounded by `limit`. */
import { readdir } from "node:fs/promises";
import { resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { fsFail, ok } from "./result.js";
import { LS_DEF, LS_DEFAULT_LIMIT, LS_MAX_LIMIT } from "./specs.js";

export { LS_DEFAULT_LIMIT, LS_MAX_LIMIT };


export const lsTool = defineLocalTool({
  ...LS_DEF,
  async execute(args, ctx) {
    const target = await resolveForTool("ls", ctx, args.path ?? ".", "read");
    if (!target.ok) return target.result;
    const dir = target.path;
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
