/**
 * Reading a small file that somebody else may have placed (a project's `.berth/settings.json`, a file an approval
 * card diffs) without ever blocking on it. Contract: the path is opened O_NONBLOCK and checked with `fstat` before
 * any read, so a FIFO or device is never read (opening a FIFO would otherwise wait for a writer forever, and a pool
 * thread with it); a directory fails with code `EISDIR`, any other non-regular file with code `ENOTREG`, a file
 * larger than `maxBytes` with code `EFBIG` — all before a byte is read. Other failures (ENOENT, EACCES, …) are
 * node:fs's own errors. Errors carry a code and never the file's contents.
 * Callback node:fs rather than node:fs/promises: the settings store reads through here on a fresh process's first
 * request, which then loads no extra module.
 */
import { close, closeSync, constants as FS, fstat, fstatSync, openSync, open, readFile, readFileSync, type Stats } from "node:fs";

/** A file that cannot be read as a regular file of bounded size; `code` is `EISDIR`, `ENOTREG` or `EFBIG`. */
export class IrregularFileError extends Error {
  constructor(readonly code: "EISDIR" | "ENOTREG" | "EFBIG") {
    super(code === "EISDIR" ? "is a directory" : code === "EFBIG" ? "is too large" : "is not a regular file (a FIFO, socket or device)");
    this.name = "IrregularFileError";
  }
}

function check(st: Stats, maxBytes: number): void {
  if (st.isDirectory()) throw new IrregularFileError("EISDIR");
  if (!st.isFile()) throw new IrregularFileError("ENOTREG");
  if (st.size > maxBytes) throw new IrregularFileError("EFBIG");
}

/** The whole file, when it is a regular file of at most `maxBytes`; see the module contract for errors. */
export function readRegularFileSync(path: string, maxBytes: number): Buffer {
  const fd = openSync(path, FS.O_RDONLY | FS.O_NONBLOCK);
  try {
    check(fstatSync(fd), maxBytes);
    const buf = readFileSync(fd);
    // The file grew between the fstat and the read: still bounded.
    if (buf.byteLength > maxBytes) throw new IrregularFileError("EFBIG");
    return buf;
  } finally {
    closeSync(fd);
  }
}

/** `readRegularFileSync` on the thread pool: the same result and errors. */
export function readRegularFile(path: string, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    open(path, FS.O_RDONLY | FS.O_NONBLOCK, (err, fd) => {
      if (err !== null) return reject(err);
      const finish = (e: Error | null, buf?: Buffer): void => close(fd, () => (e !== null ? reject(e) : resolve(buf!)));
      fstat(fd, (err2, st) => {
        if (err2 !== null) return finish(err2);
        try {
          check(st, maxBytes);
        } catch (e) {
          return finish(e as Error);
        }
        readFile(fd, (err3, buf) => {
          if (err3 !== null) return finish(err3);
          finish(buf.byteLength > maxBytes ? new IrregularFileError("EFBIG") : null, buf);
        });
      });
    });
  });
}
