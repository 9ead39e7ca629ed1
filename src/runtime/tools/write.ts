/** `write`: creates or overwrites a file with the given content, creating parent directories. */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import * as A from "../../core/arg-schema.js";
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
    const file = resolvePath(ctx.cwd, args.path);
    try {
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, args.content, { encoding: "utf8", signal: ctx.signal });
    } catch (err) {
      return fsFail(err, `write: ${args.path}`);
    }
    return ok(`wrote ${Buffer.byteLength(args.content)} bytes to ${args.path}`);
  },
});
