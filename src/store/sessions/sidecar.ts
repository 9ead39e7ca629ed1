/**
 * Sidecars: durable data derived from one version of a session file (app-service: the replay projection), so the
 * first read after a restart does not have to re-derive it from the JSONL.
 *
 * File `<home>/session-index/<id>.proj`:
 *   "BSX1" | u32 LE meta length | meta JSON {id, format, ino, size, mtimeMs, payload} | payload | SHA-256 of all before.
 *
 * Contracts:
 * - A sidecar is a cache of data derived from one version (ino, size, mtime) of the session's JSONL. `readSidecar`
 *   returns the payload with that version only when the session ID and format match and the checksum verifies;
 *   otherwise null. The caller compares the version with the file's current one: the JSONL always wins, and a
 *   stale, foreign, truncated or damaged sidecar is never used as current (the next write replaces it).
 * - Writes go to a unique temporary file in the same directory, then `rename` over the sidecar: readers see the old
 *   or the new file, never a mix. No fsync: after a crash a garbage file is possible, and the checksum rejects it.
 *   Concurrent writers (processes) are harmless: the last rename wins and every candidate is self-consistent.
 * - Bounded: payloads over MAX_SIDECAR_BYTES are neither written nor read. Never throws.
 * - Holds nothing the session file does not (files 0600 in a 0700 directory, like the sessions themselves).
 * - A writer killed inside a write leaves its temporary file (`<id>.proj.<pid>-<12 hex>.tmp`, up to the payload's
 *   size). `sweepAbandonedTemps` removes those whose writer's pid is not alive, or which are older than
 *   `ABANDONED_TMP_MS` (a reused pid: this process's own only then). A pid of another host sharing the home may be taken
 *   for a dead one: that writer's `rename` then fails and its write is dropped, as any failed write (a cache).
 */
import { constants as FS, fstatSync, mkdirSync, openSync, renameSync, unlinkSync, writev } from "node:fs";
import { readdir, stat, unlink } from "node:fs/promises";
import { createHash, randomBytes } from "node:crypto";
import { join } from "node:path";
import { closeQuietly, readInto } from "./fdio.js";
import { pidAlive } from "../process-alive.js";
import type { FileVersion } from "./reader.js";

export const MAX_SIDECAR_BYTES = 64 * 1024 * 1024;
const MAGIC = "BSX1";
const HASH_BYTES = 32;

interface Meta {
  id: string;
  format: string;
  ino: number;
  size: number;
  mtimeMs: number;
  payload: number;
}

function digest(...parts: Buffer[]): Buffer {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest();
}

/** Read size of `readHashed`: a chunk is hashed on this thread while the next one is read on the thread pool. */
const READ_CHUNK_BYTES = 256 * 1024;

/**
 * The `size` bytes of `fd` from offset 0 and the SHA-256 of all but their last HASH_BYTES, or null when the file is
 * shorter than `size`. Reading and hashing overlap (a restarted service's first replay reads and checks a sidecar
 * of megabytes: ~1-2 ms less than reading it whole, then hashing it).
 */
async function readHashed(fd: number, size: number): Promise<{ buf: Buffer; sum: Buffer } | null> {
  const buf = Buffer.allocUnsafe(size);
  const bodyEnd = size - HASH_BYTES;
  const h = createHash("sha256");
  let got = 0;
  let next = readInto(fd, buf, 0, Math.min(READ_CHUNK_BYTES, size), 0);
  while (got < size) {
    const n = await next;
    if (n === 0) return null;
    const from = got;
    got += n;
    if (got < size) next = readInto(fd, buf, got, Math.min(READ_CHUNK_BYTES, size - got), got);
    if (from < bodyEnd) h.update(buf.subarray(from, Math.min(got, bodyEnd)));
  }
  return { buf, sum: h.digest() };
}

export async function readSidecar(path: string, id: string, format: string): Promise<{ version: FileVersion; payload: Buffer } | null> {
  let fd: number;
  try {
    fd = openSync(path, FS.O_RDONLY | FS.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size < 8 + HASH_BYTES || st.size > MAX_SIDECAR_BYTES + 64 * 1024) return null;
    const read = await readHashed(fd, st.size);
    if (read === null) return null;
    const { buf, sum } = read;
    if (buf.toString("latin1", 0, 4) !== MAGIC) return null;
    const metaEnd = 8 + buf.readUInt32LE(4);
    if (metaEnd + HASH_BYTES > buf.length) return null;
    const meta = JSON.parse(buf.toString("utf8", 8, metaEnd)) as Partial<Meta>;
    const bodyEnd = buf.length - HASH_BYTES;
    const matches =
      meta.id === id &&
      meta.format === format &&
      typeof meta.ino === "number" &&
      typeof meta.size === "number" &&
      typeof meta.mtimeMs === "number" &&
      meta.payload === bodyEnd - metaEnd;
    if (!matches || !sum.equals(buf.subarray(bodyEnd))) return null;
    return { version: { ino: meta.ino as number, size: meta.size as number, mtimeMs: meta.mtimeMs as number }, payload: buf.subarray(metaEnd, bodyEnd) };
  } catch {
    return null;
  } finally {
    closeQuietly(fd);
  }
}

/**
 * Writes all of `bufs` in order at the current position, gathered (`writev`): the payload (megabytes) is not copied
 * into one buffer first, which on the main thread would delay whatever request follows the replay that wrote it.
 */
async function writeAllV(fd: number, bufs: Buffer[]): Promise<void> {
  const rest = bufs.filter((b) => b.length > 0);
  while (rest.length > 0) {
    let n = await new Promise<number>((resolve, reject) => writev(fd, rest, null, (err, w) => (err ? reject(err) : resolve(w))));
    while (n > 0 && rest.length > 0) {
      const first = rest[0]!;
      if (n >= first.length) {
        n -= first.length;
        rest.shift();
      } else {
        rest[0] = first.subarray(n);
        n = 0;
      }
    }
  }
}

export async function writeSidecar(dir: string, path: string, id: string, format: string, version: FileVersion, payload: Buffer): Promise<void> {
  if (payload.length > MAX_SIDECAR_BYTES) return;
  const metaObj: Meta = { id, format, ino: version.ino, size: version.size, mtimeMs: version.mtimeMs, payload: payload.length };
  const meta = Buffer.from(JSON.stringify(metaObj), "utf8");
  const head = Buffer.alloc(8);
  head.write(MAGIC, 0, "latin1");
  head.writeUInt32LE(meta.length, 4);
  const tmp = `${path}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
  let fd: number | null = null;
  try {
    // Not recursive: the home exists whenever its sessions do, and a home removed meanwhile is not re-created.
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    fd = openSync(tmp, FS.O_WRONLY | FS.O_CREAT | FS.O_EXCL, 0o600);
    await writeAllV(fd, [head, meta, payload, digest(head, meta, payload)]);
    closeQuietly(fd);
    fd = null;
    renameSync(tmp, path);
  } catch {
    if (fd !== null) closeQuietly(fd);
    try {
      unlinkSync(tmp);
    } catch {
      /* never created, or already renamed */
    }
  }
}

/** A sidecar temporary file older than this is abandoned whatever its pid (no write takes a fraction of it). */
export const ABANDONED_TMP_MS = 10 * 60_000;
const TMP_NAME = /\.proj\.(\d+)-[0-9a-f]{12}\.tmp$/;

/** Removes the abandoned temporary files of sidecar writes in `dir` (see the module contract). Never throws. */
export async function sweepAbandonedTemps(dir: string, now = Date.now()): Promise<void> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = TMP_NAME.exec(name);
    const pid = m === null ? NaN : Number(m[1]);
    if (!Number.isSafeInteger(pid)) continue;
    const path = join(dir, name);
    try {
      // This process's own may be a write in flight (or, old, a dead process's that had the same pid).
      if (pid > 0 && (pid === process.pid || pidAlive(pid)) && (await stat(path)).mtimeMs > now - ABANDONED_TMP_MS) continue;
      await unlink(path);
    } catch {
      /* gone meanwhile, or not ours to remove */
    }
  }
}
