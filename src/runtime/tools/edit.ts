/**
 * `edit`: exact-match replacement. `old_string` must occur exactly once unless `replace_all`;
 * zero or several occurrences fail with a message saying which. When the file uses CRLF and
 * `old_string` uses bare LF (models usually do), the strings are matched with LF turned into CRLF; in a file whose
 * every line ends in CRLF, `new_string`'s line breaks always become CRLF. Occurrences that
 * overlap count as several (which one was meant cannot be known). A file that is not UTF-8 is refused: decoding it
 * would turn each invalid byte into U+FFFD, and writing it back would change the whole file, not one place.
 */
import { constants, isUtf8 } from "node:buffer";
import type { FileHandle } from "node:fs/promises";
import type { ToolResult } from "../types.js";
import { openForWrite, openRegular, replaceContent, resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { resolvePath } from "./paths.js";
import { firstInvalidUtf8 } from "../../core/utf8.js";
import { fail, fsFail, ok } from "./result.js";
import { EDIT_DEF } from "./specs.js";

const MAX_STRING_LENGTH = constants.MAX_STRING_LENGTH;
/** A line feed not preceded by a carriage return. */
const BARE_LF = /(?<!\r)\n/;


/** Number of non-overlapping occurrences of `needle` in `hay` (needle non-empty). */
export function countOccurrences(hay: string, needle: string): number {
  let n = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + needle.length)) n++;
  return n;
}

/**
 * A local file's text, or the failure naming why it cannot be edited as text: not UTF-8 (the offset of the first
 * invalid byte).
 */
async function readUtf8(handle: FileHandle, given: string, signal: AbortSignal): Promise<string | ToolResult> {
  let buf: Buffer;
  try {
    buf = await handle.readFile({ signal });
  } catch (err) {
    return fsFail(err, `edit: ${given}`);
  }
  if (isUtf8(buf)) {
    try {
      return buf.toString("utf8");
    } catch (err) {
      return fsFail(err, `edit: ${given}`); // longer than a string can be (ERR_STRING_TOO_LONG)
    }
  }
  const at = firstInvalidUtf8(buf);
  return fail("failed", `edit: ${given} is not UTF-8 text (the byte at offset ${at} is not valid UTF-8); editing it would turn every such byte into U+FFFD, so it is left unchanged (use bash, e.g. sed, for files in other encodings)`);
}

export const editTool = defineLocalTool({
  ...EDIT_DEF,
  async execute(args, ctx) {
    if (args.old_string === args.new_string) return fail("invalid_arguments", "edit: old_string and new_string are identical");
    const target = await resolveForTool("edit", ctx, args.path, "write");
    if (!target.ok) return target.result;
    const ws = ctx.workspace;
    if (ws?.readTextFile !== undefined || ws?.writeTextFile !== undefined) {
      // The workspace's view of the file (an editor's buffer) for whichever side it offers, local files for the
      // other; the confinement above still decided whether the file may be edited.
      const file = resolvePath(ctx.cwd, args.path);
      let text: string;
      try {
        if (ws.readTextFile !== undefined) text = await ws.readTextFile(file, ctx.signal);
        else {
          const opened = await openRegular("edit", args.path, target.path);
          if (!opened.ok) return opened.result;
          let read: string | ToolResult;
          try {
            read = await readUtf8(opened.handle, args.path, ctx.signal);
          } finally {
            await opened.handle.close().catch(() => undefined);
          }
          if (typeof read !== "string") return read;
          text = read;
        }
      } catch (err) {
        return fsFail(err, `edit: ${args.path}`);
      }
      const r = applyEdit(text, args);
      if (!("next" in r)) return r;
      try {
        if (ws.writeTextFile !== undefined) await ws.writeTextFile(file, r.next, ctx.signal);
        else {
          const opened = await openForWrite("edit", args.path, target.path);
          if (!opened.ok) return opened.result;
          try {
            await replaceContent(opened.handle, target.path, r.next);
          } finally {
            await opened.handle.close().catch(() => undefined);
          }
        }
      } catch (err) {
        return fsFail(err, `edit: ${args.path}`);
      }
      return edited(args.path, r.count);
    }
    const opened = await openRegular("edit", args.path, target.path, true);
    if (!opened.ok) return opened.result;
    try {
      return await editOpened(opened.handle, target.path, args, ctx.signal);
    } finally {
      await opened.handle.close().catch(() => undefined);
    }
  },
});

type EditCall = { path: string; old_string: string; new_string: string; replace_all?: boolean | undefined };

function edited(path: string, count: number): ToolResult {
  return ok(`edited ${path}: replaced ${count} occurrence${count === 1 ? "" : "s"}`);
}

/** "lines 3, 10 and 22" (1-based) where the first occurrences of `needle` start; at most five, then a count. */
function occurrenceLines(hay: string, needle: string): string {
  const lines: number[] = [];
  let line = 1;
  let from = 0;
  let more = 0;
  for (let i = hay.indexOf(needle); i !== -1; i = hay.indexOf(needle, i + needle.length)) {
    if (lines.length === 5) {
      more++;
      continue;
    }
    for (let nl = hay.indexOf("\n", from); nl !== -1 && nl < i; nl = hay.indexOf("\n", nl + 1)) line++;
    from = i;
    lines.push(line);
  }
  const shown = more > 0 ? `${lines.join(", ")} and ${more} more` : lines.length > 1 ? `${lines.slice(0, -1).join(", ")} and ${lines.at(-1)}` : String(lines[0]);
  return `${lines.length > 1 || more > 0 ? "lines" : "line"} ${shown}`;
}

/** The edited text and the number of replacements, or the failure naming why there is none. */
function applyEdit(text: string, args: EditCall): { next: string; count: number } | ToolResult {
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
  // A file whose every line ends in CRLF keeps doing so: line breaks of new_string become CRLF too, however
  // old_string matched (a one-line old_string replaced by several lines matches as given).
  if (count > 0 && newS.includes("\n") && text.includes("\r\n") && !BARE_LF.test(text)) newS = newS.replace(/\r?\n/g, "\r\n");
  if (count === 0) return fail("failed", `edit: old_string not found in ${args.path}`);
  if (count > 1 && args.replace_all !== true) {
    return fail("failed", `edit: old_string occurs ${count} times in ${args.path} (${occurrenceLines(text, oldS)}); add surrounding context to make it unique, or set replace_all`);
  }
  // Longer than a JavaScript string can be (V8's limit, ~512 Mi UTF-16 units), the join would throw "Invalid string
  // length", which names no cause: say what the edit would have made instead. The file is left as it was.
  const size = text.length + count * (newS.length - oldS.length);
  if (size > MAX_STRING_LENGTH) {
    return fail("failed", `edit: replacing ${count.toLocaleString("en-US")} occurrence${count === 1 ? "" : "s"} would make ${args.path} ${size.toLocaleString("en-US")} characters long, more than an edit can hold (${MAX_STRING_LENGTH.toLocaleString("en-US")}); use a longer old_string or a shorter new_string`);
  }
  if (args.replace_all === true) return { next: text.split(oldS).join(newS), count };
  const at = text.indexOf(oldS);
  // The count above skips past each occurrence; one that starts inside the first is a second place it could mean.
  const again = text.indexOf(oldS, at + 1);
  if (again !== -1) {
    return fail("failed", `edit: old_string occurs more than once in ${args.path} (overlapping, at characters ${at} and ${again}); add surrounding context to make it unique, or set replace_all`);
  }
  return { next: text.slice(0, at) + newS + text.slice(at + oldS.length), count };
}

async function editOpened(handle: FileHandle, path: string, args: EditCall, signal: AbortSignal): Promise<ToolResult> {
  const text = await readUtf8(handle, args.path, signal);
  if (typeof text !== "string") return text;
  const r = applyEdit(text, args);
  if (!("next" in r)) return r;
  try {
    if (signal.aborted) return fail("cancelled", "edit: cancelled");
    await replaceContent(handle, path, r.next);
  } catch (err) {
    return fsFail(err, `edit: ${args.path}`);
  }
  return edited(args.path, r.count);
}
