/** `write`: creates or overwrites a file with the given content, creating parent directories. */
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import * as A from "../../core/arg-schema.js";
import { openForWrite, replaceContent, resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { resolvePath } from "./paths.js";
import { fsFail, ok } from "./result.js";

const WriteArgs = A.object({
  path: A.string({ min: 1, description: "File to write; relative paths resolve against the working directory." }),
  content: A.string({ description: "The complete new file content." }),
});

export const writeTool = defineLocalTool({
  name: "write",
  risk: "filesystem",
  description: "Create or overwrite a file with `content`. Parent directories are created as needed.",
  schema: WriteArgs,
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
      await replaceContent(opened.handle, args.content);
    } catch (err) {
      return fsFail(err, `write: ${args.path}`);
    } finally {
      await opened.handle.close().catch(() => undefined);
    }
    return ok(`wrote ${Buffer.byteLength(args.content)} bytes to ${args.path}`);
  },
});
