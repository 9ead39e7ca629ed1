/**
 * Store-level failures. The store knows nothing of wire formats: adapters map `code` to their own errors.
 * - `invalid_id`: the ID failed validation; no path was built from it.
 * - `busy`: another writer holds the lease, an append lock conflicts, a turn is active, or the attachment is closing.
 * - `unavailable`: missing, unreadable, malformed header, or outside the supported read bounds.
 * - `limit`: a store bound was exceeded (attachment cap, list scan budget).
 * - `lost`: this process's writer lease was compromised (e.g. reclaimed after a stall); the writer refuses appends.
 * - `invalid_record`: a record to append failed strict validation (a caller bug, never user data).
 * Messages are fixed labels; they never carry paths, IDs or record contents. `storage` keeps the errno code of a
 * failure a user can fix (a full disk, a read-only file system, a denied permission), never its message.
 */
export type SessionErrorCode = "invalid_id" | "busy" | "unavailable" | "limit" | "lost" | "invalid_record";

export class SessionError extends Error {
  /** `storage`: the file system's reason, when it is one a user can act on (see `StorageCause`). */
  constructor(
    readonly code: SessionErrorCode,
    readonly storage?: StorageCause,
  ) {
    super(`session store: ${code}`);
    this.name = "SessionError";
  }
}

/**
 * The file system's reasons for a failed session write that a user can act on. Only these errno codes are kept from
 * an error (never its message or path); any other failure has no cause to name.
 */
export type StorageCause = "ENOSPC" | "EDQUOT" | "EFBIG" | "EROFS" | "EACCES" | "EPERM" | "EIO" | "EMFILE" | "ENFILE";

/** One fixed sentence per cause: what happened (with the code) and what to do. */
const STORAGE_PROBLEMS: Record<StorageCause, string> = {
  ENOSPC: "the disk holding Berth's home (MC_HOME) is full (ENOSPC); free some space and retry",
  EDQUOT: "the disk quota of Berth's home (MC_HOME) is used up (EDQUOT); free some space and retry",
  EFBIG: "a file reached this process's file-size limit (EFBIG); raise it (ulimit -f) and retry",
  EROFS: "Berth's home (MC_HOME) is on a read-only file system (EROFS); set MC_HOME to a writable directory",
  EACCES: "permission to write in Berth's home (MC_HOME) was denied (EACCES); check that MC_HOME and its files are yours and writable",
  EPERM: "the system refused to write in Berth's home (MC_HOME) (EPERM); check that MC_HOME and its files are yours and writable",
  EIO: "the disk holding Berth's home (MC_HOME) reported an I/O error (EIO); check the disk",
  EMFILE: "this process has too many files open (EMFILE); raise the open-file limit (ulimit -n) and retry",
  ENFILE: "the system has too many files open (ENFILE); close some programs and retry",
};

/** The storage cause of a failure: a `SessionError`'s, or an errno error's own code when it is a known cause. */
export function storageCause(e: unknown): StorageCause | undefined {
  if (e instanceof SessionError) return e.storage;
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && Object.hasOwn(STORAGE_PROBLEMS, code) ? (code as StorageCause) : undefined;
}

/** The fixed sentence naming a storage cause (as `storageCause` returned it) and its fix; undefined for any other. */
export function storageProblem(cause: string | undefined): string | undefined {
  return cause !== undefined && Object.hasOwn(STORAGE_PROBLEMS, cause) ? STORAGE_PROBLEMS[cause as StorageCause] : undefined;
}

/** The fixed sentence for a failure's storage cause and its fix (`storageProblemOf(e)`), or undefined. */
export function storageProblemOf(e: unknown): string | undefined {
  return storageProblem(storageCause(e));
}
