/**
 * On-disk layout under the resolved home (passed in; the store never reads the environment):
 * - `<home>/sessions/<id>.jsonl`            one append-only session file. Nothing else is written there, so the
 *                                           list scan budget counts real entries (N sessions = N entries), but:
 * - `<home>/sessions/<id>.jsonl.tmp`        a session being created whole (create-whole.ts), for the moments it is
 *                                           written; never a session to `list` (a killed creator's is removed).
 * Locks live beside it, never inside, in `<home>/session-locks/`:
 * - `<home>/session-locks/<id>.lease`       writer lease (dirlock directory) + `<id>.owner` (pid/host of the holder)
 * - `<home>/session-locks/<id>.append`      append/rotation lock (dirlock directory) + `<id>.append.holder` (a
 *                                           symbolic link: its holder's mark, holder-mark.ts)
 * - `<home>/session-locks/<id>.reclaim`     serializes the removal of a dead holder's lease or append lock
 * Derived data (a cache, never a source of truth) in `<home>/session-index/`:
 * - `<home>/session-index/<id>.proj`        adapter projection sidecar keyed by the session file version (sidecar.ts)
 * Contract: every function taking an ID throws `SessionError("invalid_id")` unless `isValidSessionId(id)`,
 * so no path is ever derived from an unvalidated ID.
 */
import { join } from "node:path";
import { SessionError } from "./errors.js";
import { isValidSessionId } from "./ids.js";

export const SESSION_FILE_SUFFIX = ".jsonl";
const COPY_TEMP_SUFFIX = ".jsonl.tmp";

/** `idFromFileName`'s answer for a session-suffixed name whose ID is not valid (no string can be mistaken for it). */
export const INVALID_SESSION_FILE: unique symbol = Symbol("invalid session file name");

export class SessionPaths {
  readonly sessionsDir: string;
  readonly locksDir: string;
  readonly indexDir: string;

  constructor(home: string) {
    this.sessionsDir = join(home, "sessions");
    this.locksDir = join(home, "session-locks");
    this.indexDir = join(home, "session-index");
  }

  private checked(id: string): string {
    if (!isValidSessionId(id)) throw new SessionError("invalid_id");
    return id;
  }

  data(id: string): string {
    return join(this.sessionsDir, this.checked(id) + SESSION_FILE_SUFFIX);
  }
  lease(id: string): string {
    return join(this.locksDir, this.checked(id) + ".lease");
  }
  owner(id: string): string {
    return join(this.locksDir, this.checked(id) + ".owner");
  }
  append(id: string): string {
    return join(this.locksDir, this.checked(id) + ".append");
  }
  appendMark(id: string): string {
    return join(this.locksDir, this.checked(id) + ".append.holder");
  }
  reclaim(id: string): string {
    return join(this.locksDir, this.checked(id) + ".reclaim");
  }
  copyTemp(id: string): string {
    return join(this.sessionsDir, this.checked(id) + COPY_TEMP_SUFFIX);
  }
  sidecar(id: string): string {
    return join(this.indexDir, this.checked(id) + ".proj");
  }

  /** Maps a directory entry name back to an ID; null when it is not a session file, `INVALID_SESSION_FILE` when its ID is not valid. */
  static idFromFileName(name: string): string | null | typeof INVALID_SESSION_FILE {
    if (!name.endsWith(SESSION_FILE_SUFFIX)) return null;
    const id = name.slice(0, -SESSION_FILE_SUFFIX.length);
    return isValidSessionId(id) ? id : INVALID_SESSION_FILE;
  }

  /** The ID of a temporary session file's name (`copyTemp`), or null for any other name. */
  static idFromCopyTemp(name: string): string | null {
    if (!name.endsWith(COPY_TEMP_SUFFIX)) return null;
    const id = name.slice(0, -COPY_TEMP_SUFFIX.length);
    return isValidSessionId(id) ? id : null;
  }
}
