/**
 * Raw file-descriptor I/O for the store's hot paths.
 *
 * Contract: metadata calls that touch no file data (`open`, including a new file's exclusive creation, `fstat`, `close`, the first short
 * write of a new file, a session writer's small appends: writer.ts) are synchronous — microseconds each, whereas every thread-pool round trip costs a scheduling delay on a
 * loaded machine and create/open/replay chain several of them. Reads of file bodies and every fsync stay
 * asynchronous, so a slow disk never blocks the event loop for longer than a metadata syscall.
 * Callers own the descriptors they open and close them exactly once (`closeQuietly`).
 */
import { closeSync, constants as FS, fdatasync, fsync, openSync, read, unlinkSync, write, writeSync } from "node:fs";

/** Reads up to `len` bytes at `pos` into `buf[off..]`; resolves with the count read (0 at EOF). */
export function readInto(fd: number, buf: Buffer, off: number, len: number, pos: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, buf, off, len, pos, (err, n) => (err ? reject(err) : resolve(n))));
}

/** Reads `len` bytes at `pos` (fewer at EOF). */
export async function readAt(fd: number, pos: number, len: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(len);
  let got = 0;
  while (got < len) {
    const n = await readInto(fd, buf, got, len - got, pos + got);
    if (n === 0) break;
    got += n;
  }
  return got === len ? buf : buf.subarray(0, got);
}

/** Writes all of `buf` at the current position (the file's end for O_APPEND descriptors). */
export async function writeAll(fd: number, buf: Buffer): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    off += await new Promise<number>((resolve, reject) =>
      write(fd, buf, off, buf.length - off, null, (err, n) => (err ? reject(err) : resolve(n))),
    );
  }
}

/** `writeAll` on this thread: for small appends (a page-cache copy). */
export function writeAllSync(fd: number, buf: Buffer): void {
  for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
}

export function syncData(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fdatasync(fd, (err) => (err ? reject(err) : resolve())));
}

export function syncAll(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
}

/** fsyncs a directory (its entries: a created, linked or removed name). */
export async function syncDir(dir: string): Promise<void> {
  const d = openSync(dir, FS.O_RDONLY | FS.O_DIRECTORY);
  try {
    await syncAll(d);
  } finally {
    closeQuietly(d);
  }
}

/** Removes a file; one already gone (or not removable: best effort) is no failure. */
export function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    /* already gone */
  }
}

export function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    /* already closed or EIO on close: the descriptor is released either way */
  }
}
