/**
 * Session IDs: opaque to clients, validated here before any path is built from them.
 * Contract: `isValidSessionId(id)` true ⇒ `<id>.jsonl` is a single safe file name inside the sessions
 * directory (no separators, no NUL, no `..`, not hidden, not absolute, ≤ 128 bytes, ASCII only).
 */
import { randomBytes } from "../random.js";

export const MAX_SESSION_ID_BYTES = 128;

/** First character alphanumeric (never hidden, never `.`/`..`), then `[A-Za-z0-9._-]`, no `..` anywhere. */
const SESSION_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function isValidSessionId(id: unknown): id is string {
  return typeof id === "string" && id.length <= MAX_SESSION_ID_BYTES && SESSION_ID_RE.test(id) && !id.includes("..");
}

/** Generates a fresh session ID. Injectable so tests can force collisions or fixed IDs. */
export type SessionIdGenerator = (nowMs: number) => string;

/**
 * Default IDs sort by creation time (list order is by ID): `s<11 base36 ms digits>-<20 hex random>`.
 * 33 bytes, always valid.
 */
export const defaultSessionId: SessionIdGenerator = (nowMs) =>
  `s${Math.max(0, Math.floor(nowMs)).toString(36).padStart(11, "0")}-${randomBytes(10).toString("hex")}`;
