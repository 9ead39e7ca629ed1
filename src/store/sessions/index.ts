/** Public surface of the session store. Protocol adapters and the turn loop import from here only. */
export { SessionError, storageCause, storageProblem, storageProblemOf, type SessionErrorCode, type StorageCause } from "./errors.js";
export { isValidSessionId, defaultSessionId, MAX_SESSION_ID_BYTES, type SessionIdGenerator } from "./ids.js";
export { SessionStore, DEFAULT_WINDOW, lastValidCheckpoint, type SessionHandle, type SessionStoreOptions, type ListEntry, type ListPage, type History, type HistoryBounds } from "./store.js";
export { SessionManager, type TurnLease, type BeginTurnOptions, type CloseStatus } from "./attachments.js";
export { SessionWriter } from "./writer.js";
export { FIRST_SEQ, FORMAT_VERSION, TERMINAL_STATUSES, type NewRecord, type StoredRecord, type UserAttachment, type HeaderRecord, type TerminalStatus, type RecordKind } from "./records.js";
export { sameVersion, type FileVersion, type ResumePoint, type ReuseCheck, type WindowBounds, type WindowSnapshot } from "./reader.js";
export type { LockTuning, Lease } from "./locks.js";
