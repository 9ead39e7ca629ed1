/**
 * `edit`: exact-match replacement. `old_string` must occur exactly once unless `replace_all`;
 * zero or several occurrences fail with a message saying which. When the file uses CRLF and
 * `old_string` uses bare LF (models usually do), the strings are matched with LF turned into CRLF.
 */
import { readFile, writeFile } from "node:fs/promises";
import * as A from "../../core/arg-schema.js";
import { defineLocalTool } from "./define.js";
import { resolvePath } from "./paths.js";
import { fail, fsFail, ok } from "./result.js";

const EditArgs = A.object({
  path: A.string({ min: 1, description: "File to edit; relative paths resolve against the working directory." }),
  old_string: A.string({ min: 1, description: "Exact text to replace (whitespace included). Must be unique in the file unless replace_all." }),
  new_string: A.string({ description: "Replacement text." }),
  replace_all: A.optional(A.boolean({ description: "Replace every occurrence instead of requiring exactly one." })),
});

/** Number of non-overlapping occurrences of `needle` in `hay` (needle non-empty). */
export function countOccurrences(hay: string, needle: string): number {
  let n = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + needle.length)) n++;
  return n;
}

export const editTool = defineLocalTool({
  name: "edit",
  risk: "filesystem",
  description:
    "Replace exact text in a file. `old_string` must match exactly once (include surrounding lines to make it unique) unless `replace_all` is true.",
  schema: EditArgs,
  async execute(args, ctx) {
    if (args.old_string === args.new_string) return fail("invalid_arguments", "edit: old_string and new_string are identical");
    const file = resolvePath(ctx.cwd, args.path);
    let text: string;
    try {
      text = await readFile(file, { encoding: "utf8", signal: ctx.signal });
    } catch (err) {
      return fsFail(err, `edit: ${args.path}`);
    }
    let oldS = args.old_string;
    let newS = args.new_string;
    let count = countOccurrences(text, oldS);
    if (count === 0 && text.includes("\r\n") && oldS.includes("\n") && !oldS.includes("\r")) {
      const crlf = (s: string): string => s.replace(/\r?\n/g, "\r\n");
      const c = countOccurrences(text, crlf(oldS));
      if (c > 0) {
        oldS = crlf(oldS);
        newS = crlf(newS);
        count = c;
      }
    }
    if (count === 0) return fail("failed", `edit: old_string not found in ${args.path}`);
    if (count > 1 && args.replace_all !== true) {
      return fail("failed", `edit: old_string occurs ${count} times in ${args.path}; add surrounding context to make it unique, or set replace_all`);
    }
    let next: string;
    if (args.replace_all === true) {
      next = text.split(oldS).join(newS);
    } else {
      const at = text.indexOf(oldS);
      next = text.slice(0, at) + newS + text.slice(at + oldS.length);
    }
    try {
      await writeFile(file, next, { encoding: "utf8", signal: ctx.signal });
    } catch (err) {
      return fsFail(err, `edit: ${args.path}`);
    }
    return ok(`edited ${args.path}: replaced ${count} occurrence${count === 1 ? "" : "s"}`);
  },
});
