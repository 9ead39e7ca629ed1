/**
 * Store-level failures. The store knows nothing of wire formats: adapters map `code` to their own errors.
 * - `invalid_id`: the ID failed validation; no path was built from it.
 * - `busy`: another writer holds the lease, an append lock conflicts, a turn is active, or the attachment is closing.
 * - `unavailable`: missing, unreadable, malformed header, or outside the supported read bounds.
 * - `limit`: a store bound was exceeded (attachment cap, list scan budget).
 * - `lost`: this process's writer lease was compromised (e.g. reclaimed after a stall); the writer refuses appends.
 * - `invalid_record`: a record to append failed strict validation (a caller bug, never user data).
 * Messages are fixed labels; they never carry paths, IDs or record contents.
 */
export type SessionErrorCode = "invalid_id" | "busy" | "unavailable" | "limit" | "lost" | "invalid_record";

export class SessionError extends Error {
  constructor(readonly code: SessionErrorCode) {
    super(`session store: ${code}`);
    this.name = "SessionError";
  }
}
