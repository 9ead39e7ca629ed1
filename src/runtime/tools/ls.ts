/**
 * `ls`: one directory's entries, sorted, directories suffixed with `/`, bounded by `limit`.
 * The directory is read entry by entry (`opendir`), never whole: only the `limit` first names (by sort order)
 * are kept, the rest are counted, and reading stops after `LS_MAX_SCAN` entries, so a directory holding millions
 * of entries costs bounded memory and time; the result then says that the listing covers only the entries read.
 */
import { opendir } from "node:fs/promises";
import type { Tool } from "../types.js";
import { resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { fail, fsFail, ok } from "./result.js";
import { LS_DEF, LS_DEFAULT_LIMIT, LS_MAX_LIMIT } from "./specs.js";

export { LS_DEFAULT_LIMIT, LS_MAX_LIMIT };
/** Entries one `ls` call reads at most (the search walk's bound). */
export const LS_MAX_SCAN = 200_000;

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** TEST seam: `maxScan` lowers the entries read (the registry uses `lsTool`, with `LS_MAX_SCAN`). */
export function createLsTool(o: { maxScan?: number } = {}): Tool {
  const maxScan = o.maxScan ?? LS_MAX_SCAN;
  return defineLocalTool({
    ...LS_DEF,
    async execute(args, ctx) {
      const target = await resolveForTool("ls", ctx, args.path ?? ".", "read");
      if (!target.ok) return target.result;
      const limit = args.limit ?? LS_DEFAULT_LIMIT;
      // The `limit` smallest names: collected up to twice the limit, then sorted and cut (amortized n log limit).
      let kept: string[] = [];
      let read = 0;
      let stopped = false;
      try {
        const dir = await opendir(target.path, { bufferSize: 256 });
        try {
          for (let e = await dir.read(); e !== null; e = await dir.read()) {
            if (read === maxScan) {
              stopped = true;
              break;
            }
            read++;
            kept.push(e.isDirectory() ? `${e.name}/` : e.name);
            if (kept.length >= 2 * limit) kept = kept.sort(byName).slice(0, limit);
            if (read % 4096 === 0) ctx.signal.throwIfAborted();
          }
        } finally {
          await dir.close().catch(() => undefined);
        }
      } catch (err) {
        if (ctx.signal.aborted) return fail("cancelled", "ls: cancelled");
        return fsFail(err, `ls: ${args.path ?? "."}`);
      }
      kept.sort(byName);
      if (read === 0) return ok("(empty directory)");
      let body = kept.slice(0, limit).join("\n");
      if (stopped) {
        body += `\n[stopped reading after ${maxScan} entries: the directory holds more; shown are the first by name among those read; use bash (e.g. find with -name) to look for one]`;
      } else if (read > limit) body += `\n[${read - limit} more entries not shown; raise limit]`;
      return ok(body);
    },
  });
}

export const lsTool = createLsTool();
