/**
 * Creating a session that starts with records (a fork's copy), all or nothing: a process killed at any point of it
 * (SIGKILL, a power loss) leaves either no session or the whole one, never a session holding part of the records.
 *
 * Contracts:
 * - `createWhole` takes a fresh ID's lease first, writes the header and every record to `sessions/<id>.jsonl.tmp`
 *   (a name `list` never takes for a session: paths.ts), fsyncs it, links it to `<id>.jsonl` (a link never replaces
 *   an existing file, like `create`'s exclusive creation; a collision retries under a new ID), removes the temporary
 *   name and fsyncs the directory, and only then releases the lease and resolves with the ID. So the session
 *   appears whole in one step, and once acknowledged it survives a power loss. On a file system without hard links
 *   the temporary file is renamed into place instead (under the lease nobody else can create that ID's file:
 *   every creator takes the lease first).
 * - Records get seqs `FIRST_SEQ`, `FIRST_SEQ + 1`, … in order, and each its own `at` from the store's clock, as a new
 *   session's writer would give them. Each is validated as `append` validates: one that is invalid or over
 *   `MAX_RECORD_BYTES` fails the whole create (`invalid_record`) and leaves nothing; so does a write the file system
 *   refuses (`unavailable`, with its cause).
 * - A temporary file whose ID's lease can be taken is a killed creator's debris (a live creator holds the lease from
 *   before the file exists until its name is gone): `removeAbandonedCopy` removes it under that lease. `list` calls
 *   it for every temporary name it scans (store.ts), as it removes the empty file a killed `create` left.
 */
import { constants as FS, existsSync, linkSync, openSync, renameSync } from "node:fs";
import { SessionError, storageCause } from "./errors.js";
import { closeQuietly, syncDir, unlinkQuietly, writeAll } from "./fdio.js";
import type { SessionLocks } from "./locks.js";
import type { SessionPaths } from "./paths.js";
import { FIRST_SEQ, MAX_RECORD_BYTES, encodeRecord, type HeaderRecord, type NewRecord } from "./records.js";

/** What `createWhole` needs of the store. */
export interface WholeCreateIo {
  paths: SessionPaths;
  locks: SessionLocks;
  clock: () => number;
  sync: (fd: number) => Promise<void>;
  /** A fresh ID and its header (the store's `create` makes them the same way). */
  newHeader: () => HeaderRecord;
}

/** The copy is written in pieces of about this many characters (memory stays bounded beside the records). */
const PIECE_CHARS = 1024 * 1024;

/** Error codes of a file system that cannot make hard links. */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

/** Creates a session holding `records`, whole or not at all (see the module contract); resolves with its ID. */
export async function createWhole(io: WholeCreateIo, records: readonly NewRecord[]): Promise<string> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const header = io.newHeader();
    const id = header.session_id;
    let lease;
    try {
      lease = await io.locks.acquireLease(id);
    } catch (e) {
      if (e instanceof SessionError && e.code === "busy") continue;
      throw e;
    }
    try {
      if (await writeWhole(io, header, records)) return id;
    } finally {
      await lease.release();
    }
  }
  throw new SessionError("busy");
}

/** Writes the session under the lease; false when its ID's file (or temporary file) already exists. */
async function writeWhole(io: WholeCreateIo, header: HeaderRecord, records: readonly NewRecord[]): Promise<boolean> {
  const id = header.session_id;
  const tmp = io.paths.copyTemp(id);
  const path = io.paths.data(id);
  let fd: number;
  try {
    fd = openSync(tmp, FS.O_WRONLY | FS.O_CREAT | FS.O_EXCL, 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw new SessionError("unavailable", storageCause(e));
  }
  try {
    let text = JSON.stringify(header) + "\n";
    for (let i = 0; i < records.length; i++) {
      text += line(records[i]!, FIRST_SEQ + i, new Date(io.clock()).toISOString()) + "\n";
      if (text.length >= PIECE_CHARS) {
        await writeAll(fd, Buffer.from(text, "utf8"));
        text = "";
      }
    }
    if (text !== "") await writeAll(fd, Buffer.from(text, "utf8"));
    await io.sync(fd);
    if (!place(tmp, path)) return false;
  } catch (e) {
    throw e instanceof SessionError ? e : new SessionError("unavailable", storageCause(e));
  } finally {
    closeQuietly(fd);
    unlinkQuietly(tmp);
  }
  try {
    await syncDir(io.paths.sessionsDir);
  } catch (e) {
    // Not known to be durable: not acknowledged, so not left for anyone to list.
    unlinkQuietly(path);
    throw new SessionError("unavailable", storageCause(e));
  }
  return true;
}

/** One record line, validated as the writer's `append` validates it. */
function line(rec: NewRecord, seq: number, at: string): string {
  let text: string;
  try {
    text = encodeRecord(rec, seq, at);
  } catch {
    throw new SessionError("invalid_record");
  }
  if (Buffer.byteLength(text) + 1 > MAX_RECORD_BYTES) throw new SessionError("invalid_record");
  return text;
}

/** Gives the written file its session name, never replacing a file; false when that name exists. */
function place(tmp: string, path: string): boolean {
  try {
    linkSync(tmp, path);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? "";
    if (code === "EEXIST") return false;
    if (!NO_HARD_LINKS.has(code)) throw e;
  }
  if (existsSync(path)) return false;
  renameSync(tmp, path);
  return true;
}

/** Removes `id`'s temporary copy when its lease can be taken (its creator is gone); best effort. */
export async function removeAbandonedCopy(paths: SessionPaths, locks: SessionLocks, id: string): Promise<void> {
  let lease;
  try {
    lease = await locks.acquireLease(id);
  } catch {
    return;
  }
  try {
    unlinkQuietly(paths.copyTemp(id));
  } finally {
    await lease.release();
  }
}
