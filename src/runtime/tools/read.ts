/**
 * `read`: a text file's lines, from `offset` (1-based) for up to `limit` lines. Streams the file,
 * so a huge file costs only the lines returned. Output is raw text (no line-number prefixes) with
 * a trailing note when more lines remain, naming the `offset` to continue from. Binary files
 * (a NUL byte in the first 8 KiB) and UTF-16 files (a byte-order mark) are refused; a file with bytes that are not
 * UTF-8 (Latin-1…) is shown with U+FFFD for them and a note saying so, naming the first one's offset (checked over
 * the bytes read).
 */
import { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { completeUtf8End, firstInvalidUtf8 } from "../../core/utf8.js";
import { openRegular, resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { resolvePath } from "./paths.js";
import { fail, fsFail, MAX_RESULT_BYTES, ok } from "./result.js";
import { READ_DEF, READ_DEFAULT_LIMIT, READ_MAX_LIMIT } from "./specs.js";

export { READ_DEFAULT_LIMIT, READ_MAX_LIMIT };
/** Longer lines are cut to this many characters with a marker. */
export const READ_MAX_LINE_CHARS = 4000;
/** Body budget, leaving room for the continuation note under MAX_RESULT_BYTES. */
const BODY_BUDGET = MAX_RESULT_BYTES - 512;


export const readTool = defineLocalTool({
  ...READ_DEF,
  async execute(args, ctx) {
    const target = await resolveForTool("read", ctx, args.path, "read");
    if (!target.ok) return target.result;
    const ws = ctx.workspace;
    let source: () => Readable;
    if (ws?.readTextFile) {
      // The workspace's view of the file (an editor's buffer, unsaved changes included), read whole; the
      // confinement above still decided whether it may be read.
      let text: string;
      try {
        text = await ws.readTextFile(resolvePath(ctx.cwd, args.path), ctx.signal);
      } catch (err) {
        return fsFail(err, `read: ${args.path}`);
      }
      source = () => Readable.from([Buffer.from(text, "utf8")]);
    } else {
      const opened = await openRegular("read", args.path, target.path);
      if (!opened.ok) return opened.result;
      // The stream owns the handle and closes it when destroyed or ended.
      source = () => opened.handle.createReadStream({ highWaterMark: 64 * 1024, autoClose: true });
    }
    const offset = args.offset ?? 1;
    const limit = args.limit ?? READ_DEFAULT_LIMIT;
    const r = await readLines(source, offset, limit, ctx.signal);
    if (r.kind === "utf16") {
      return fail("failed", `read: ${args.path} is UTF-16 text (it starts with a UTF-16 byte-order mark); read shows UTF-8 text only: convert it with bash (e.g. iconv -f UTF-16 -t UTF-8)`);
    }
    if (r.kind === "binary") return fail("failed", `read: ${args.path} looks like a binary file`);
    if (r.kind === "aborted") return fail("cancelled", "read: cancelled");
    if (r.kind === "error") return fsFail(r.error, `read: ${args.path}`);
    if (r.lines.length === 0 && offset > 1) {
      return fail("failed", `read: offset ${offset} is past the end of ${args.path} (${r.totalLines} lines)`);
    }
    if (r.totalLines === 0) return ok("(empty file)");
    let body = r.lines.join("\n");
    const last = offset + r.lines.length - 1;
    if (r.more) {
      body += `\n[showing lines ${offset}-${last}; more remain: continue with offset=${last + 1}]`;
    }
    if (r.firstInvalid !== -1) {
      body += `\n[${args.path} is not UTF-8 text: the byte at offset ${r.firstInvalid} is not valid UTF-8, and such bytes show as U+FFFD (\uFFFD). edit refuses this file and write would replace those bytes with U+FFFD: convert it with bash first (e.g. iconv -f LATIN1 -t UTF-8)]`;
    }
    return ok(body);
  },
});

type ReadOutcome =
  /** `firstInvalid`: stream offset of the first byte read that is not UTF-8, or -1. */
  | { kind: "ok"; lines: string[]; more: boolean; totalLines: number; firstInvalid: number }
  | { kind: "binary" }
  | { kind: "utf16" }
  | { kind: "aborted" }
  | { kind: "error"; error: unknown };

/** Finds the first byte of a stream that is not UTF-8, chunk by chunk (a character split across chunks is joined). */
class Utf8Check {
  private pending: Buffer = Buffer.alloc(0);
  /** Stream offset of `pending[0]`. */
  private offset = 0;
  firstInvalid = -1;

  push(chunk: Buffer): void {
    if (this.firstInvalid !== -1) return;
    const data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    const end = completeUtf8End(data);
    const at = firstInvalidUtf8(data.subarray(0, end));
    if (at !== -1) {
      this.firstInvalid = this.offset + at;
      return;
    }
    this.pending = Buffer.from(data.subarray(end));
    this.offset += end;
  }

  /** The stream ended: a character still incomplete is invalid. */
  end(): void {
    if (this.firstInvalid === -1 && this.pending.length > 0) this.firstInvalid = this.offset;
  }
}

/** Collects lines [offset, offset+limit) within BODY_BUDGET bytes; stops reading once done. */
function readLines(open: () => Readable, offset: number, limit: number, signal: AbortSignal): Promise<ReadOutcome> {
  return new Promise((resolve) => {
    const stream = open();
    const decoder = new StringDecoder("utf8");
    const lines: string[] = [];
    let bytes = 0;
    let lineNo = 0; // lines completed so far
    let carry = "";
    let first = true;
    let settled = false;
    const check = new Utf8Check();
    const done = (more: boolean): ReadOutcome => ({ kind: "ok", lines, more, totalLines: lineNo, firstInvalid: check.firstInvalid });
    const finish = (o: ReadOutcome): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      stream.destroy();
      resolve(o);
    };
    const onAbort = (): void => finish({ kind: "aborted" });
    signal.addEventListener("abort", onAbort, { once: true });
    /** Takes one complete line; returns false when collection is done. */
    const take = (line: string): boolean => {
      lineNo++;
      if (lineNo < offset) return true;
      if (lines.length >= limit) return false;
      const text = line.length > READ_MAX_LINE_CHARS ? `${line.slice(0, READ_MAX_LINE_CHARS)} [… line cut at ${READ_MAX_LINE_CHARS} chars]` : line;
      const size = Buffer.byteLength(text) + 1;
      if (bytes + size > BODY_BUDGET && lines.length > 0) return false;
      lines.push(text);
      bytes += size;
      return true;
    };
    stream.on("data", (chunk: Buffer | string) => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      if (first) {
        first = false;
        const b0 = buf[0];
        const b1 = buf[1];
        if ((b0 === 0xff && b1 === 0xfe) || (b0 === 0xfe && b1 === 0xff)) return finish({ kind: "utf16" });
        if (buf.subarray(0, 8192).includes(0)) return finish({ kind: "binary" });
      }
      check.push(buf);
      const text = carry + decoder.write(buf);
      let start = 0;
      for (let nl = text.indexOf("\n"); nl !== -1; nl = text.indexOf("\n", start)) {
        const line = text.slice(start, nl);
        start = nl + 1;
        if (!take(line.endsWith("\r") ? line.slice(0, -1) : line)) {
          return finish(done(true));
        }
      }
      carry = text.slice(start);
      // An endless line must not grow memory without bound.
      if (carry.length > READ_MAX_LINE_CHARS * 4) carry = carry.slice(0, READ_MAX_LINE_CHARS + 1);
    });
    stream.on("error", (error) => finish({ kind: "error", error }));
    stream.on("end", () => {
      check.end();
      const rest = carry + decoder.end();
      if (rest.length > 0 && !take(rest)) return finish(done(true));
      finish(done(false));
    });
  });
}
