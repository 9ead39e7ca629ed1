/**
 * `write`: creates or overwrites a file with the given content, creating parent directories. The file is replaced
 * atomically (confine.ts `replaceContent`): a failed or interrupted write leaves the old content whole.
 */
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { openForWrite, replaceContent, resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { resolvePath } from "./paths.js";
import { fsFail, ok } from "./result.js";
import { WRITE_DEF } from "./specs.js";


export const writeTool = defineLocalTool({
  ...WRITE_DEF,
  async execute(args, ctx) {
    const target = await resolveForTool("write", ctx, args.path, "write");
    if (!target.ok) return target.result;
    if (ctx.workspace?.writeTextFile) {
      // The workspace (an editor) writes the file itself; the confinement above still decided whether it may.
      try {
        await ctx.workspace.writeTextFile(resolvePath(ctx.cwd, args.path), args.content, ctx.signal);
      } catch (err) {
        return fsFail(err, `write: ${args.path}`);
      }
      return ok(`wrote ${Buffer.byteLength(args.content)} bytes to ${args.path}`);
    }
    try {
      await mkdir(dirname(target.path), { recursive: true });
    } catch (err) {
      return fsFail(err, `write: ${args.path}`);
    }
    const opened = await openForWrite("write", args.path, target.path);
    if (!opened.ok) return opened.result;
    try {
      await replaceContent(opened.handle, target.path, args.content);
    } catch (err) {
      return fsFail(err, `write: ${args.path}`);
    } finally {
      await opened.handle.close().catch(() => undefined);
    }
    return ok(`wrote ${Buffer.byteLength(args.content)} bytes to ${args.path}`);
  },
});
