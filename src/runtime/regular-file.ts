/**
 * Reading a file the runtime itself needs (instruction files, image attachments) without ever blocking a pool
 * thread. Contract: the path is opened non-blocking and checked with fstat before any read, so a FIFO, socket or
 * device is never read; returns the first `readBytes` bytes (or fewer) and the file's size, or null when the file
 * is missing, unreadable or not a regular file. Never throws.
 */
import { constants as FS } from "node:fs";
import { open } from "node:fs/promises";

export interface RegularFileHead {
  bytes: Buffer;
  size: number;
}

export async function readRegularFileHead(path: string, readBytes: number): Promise<RegularFileHead | null> {
  let fh;
  try {
    fh = await open(path, FS.O_RDONLY | FS.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return null;
    const buf = Buffer.alloc(Math.min(st.size, readBytes));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return { bytes: buf.subarray(0, bytesRead), size: st.size };
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => undefined);
  }
}
