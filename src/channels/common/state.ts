/**
 * Durable delivery state of one channel account (at-least-once inbound, exactly one turn per message).
 *
 * Contract:
 * - `seen` keeps the newest 4096 platform message IDs (exact strings) the bridge acted on; a seen ID never starts a
 *   turn again. Messages that started nothing (ignored by policy or kind, dropped as busy) are remembered apart, in
 *   `ignored` (newest 4096), so a burst of them never pushes a handled ID out and lets its redelivery run twice.
 * - `claim()` records an in-flight claim; callers `save()` before starting the turn and before saving the cursor or
 *   acking, so a crash after the claim can only lead to a failure reply, never a second turn.
 * - Held replies: at most 4 per conversation and 32 KiB per conversation, 128 in total, kept 7 days.
 * - Message IDs are kept as `storedId` (an ID past MAX_ID_BYTES as its digest) and the cursor only within
 *   MAX_CURSOR_BYTES, so no platform-supplied string grows the file (the bridge refuses messages whose other
 *   identifiers are past their bounds before they reach a claim).
 * - The state is bound to a credential fingerprint; a state file written for other credentials is set aside (renamed
 *   `.stale`) and started fresh, so a new login never inherits another bot's cursor.
 */
import { rename } from "node:fs/promises";
import { utf8Length } from "../../core/utf8.js";
import { ChannelFileError, readJsonFile, writePrivateAtomic } from "./files.js";
import { MAX_CURSOR_BYTES, storedId } from "./ids.js";

export const SEEN_LIMIT = 4096;
export const IGNORED_LIMIT = 4096;
const HELD_PER_CONVERSATION = 4;
const HELD_BYTES_PER_CONVERSATION = 32 * 1024;
const HELD_TOTAL = 128;
const HELD_MAX_AGE_MS = 7 * 24 * 3600 * 1000;

export interface Claim {
  id: string;
  conversation: string;
  /** Platform reply handle (WeChat: the user; Feishu: the message ID), enough to send a failure reply. */
  target: ReplyTarget;
  /** Set once the turn's reply is ready: what is left to send, so a restart resumes instead of failing. */
  pending?: PendingReply;
}

export interface PendingReply {
  parts: string[];
  next: number;
  files: Array<{ path: string; name: string; size: number; caption: string | null }>;
  nextFile: number;
  dropped: number;
}

export interface ReplyTarget {
  /** Direct chat user / group / thread the reply goes to. */
  to: string;
  /** WeChat context token or Feishu message ID to reply to; null sends unprompted. */
  handle: string | null;
  /** WeChat group ID or Feishu chat ID when not a direct chat. */
  chat?: string | null;
  /** Feishu: the reply stays in the message's thread. */
  inThread?: boolean;
}

interface HeldReply {
  text: string;
  at: number;
}

interface StateFile {
  version: 1;
  fingerprint: string;
  cursor: string;
  checkpoint: Record<string, number>;
  seen: string[];
  /** Absent in files written before it existed. */
  ignored: string[];
  in_flight: Claim[];
  held: Record<string, HeldReply[]>;
}

export class DeliveryState {
  private data: StateFile;
  private seenSet: Set<string>;
  private ignoredSet: Set<string>;
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly path: string,
    data: StateFile,
  ) {
    this.data = data;
    this.seenSet = new Set(data.seen);
    this.ignoredSet = new Set(data.ignored);
  }

  /**
   * A file that is itself unusable (not JSON, not UTF-8, nested too deep, too large, a FIFO: `ChannelFileError`'s
   * `setAside`) is renamed `<path>.corrupt` and the account starts afresh, saying so through `log`; one that could not
   * be read (permissions, I/O, no file descriptors left) is kept and the error thrown, so a passing fault never costs
   * the cursor, the seen IDs and the claims.
   */
  static async load(path: string, fingerprint: string, log?: (line: string) => void): Promise<DeliveryState> {
    let raw: unknown = null;
    try {
      raw = await readJsonFile(path);
    } catch (err) {
      if (!(err instanceof ChannelFileError && err.setAside)) throw err;
      const moved = await rename(path, `${path}.corrupt`).then(() => true, () => false);
      log?.(`channels: ${err.message.replace(/; move it away$/, "")}; ${moved ? `moved it to ${path}.corrupt` : "it could not be moved away"} and started with empty delivery state`);
    }
    const fresh: StateFile = { version: 1, fingerprint, cursor: "", checkpoint: {}, seen: [], ignored: [], in_flight: [], held: {} };
    if (raw === null || typeof raw !== "object") return new DeliveryState(path, fresh);
    const r = raw as Partial<StateFile>;
    if (r.fingerprint !== fingerprint) {
      await rename(path, `${path}.stale`).catch(() => undefined);
      return new DeliveryState(path, fresh);
    }
    return new DeliveryState(path, {
      version: 1,
      fingerprint,
      cursor: typeof r.cursor === "string" ? r.cursor : "",
      checkpoint: r.checkpoint && typeof r.checkpoint === "object" ? r.checkpoint : {},
      seen: Array.isArray(r.seen) ? r.seen.filter((s): s is string => typeof s === "string").slice(-SEEN_LIMIT).map(storedId) : [],
      ignored: Array.isArray(r.ignored) ? r.ignored.filter((s): s is string => typeof s === "string").slice(-IGNORED_LIMIT).map(storedId) : [],
      in_flight: Array.isArray(r.in_flight) ? r.in_flight : [],
      held: r.held && typeof r.held === "object" ? r.held : {},
    });
  }

  /** Undoes `claim`/`markSeen`/`markIgnored` of these IDs (after their save failed), so a redelivery handles them again. */
  forget(given: ReadonlySet<string>): void {
    const ids = new Set([...given].map(storedId));
    this.data.in_flight = this.data.in_flight.filter((c) => !ids.has(c.id));
    this.data.seen = this.data.seen.filter((id) => !ids.has(id));
    this.data.ignored = this.data.ignored.filter((id) => !ids.has(id));
    for (const id of ids) {
      this.seenSet.delete(id);
      this.ignoredSet.delete(id);
    }
  }

  get cursor(): string {
    return this.data.cursor;
  }
  /**
   * Saves a new cursor (an empty one never replaces a cursor). One past MAX_CURSOR_BYTES is not kept: false, and the
   * saved cursor stays as it was.
   */
  setCursor(c: string): boolean {
    if (c.length > MAX_CURSOR_BYTES || utf8Length(c) > MAX_CURSOR_BYTES) return false;
    if (c !== "") this.data.cursor = c;
    return true;
  }
  get checkpoint(): Record<string, number> {
    return this.data.checkpoint;
  }

  has(given: string): boolean {
    const id = storedId(given);
    return this.seenSet.has(id) || this.ignoredSet.has(id) || this.data.in_flight.some((c) => c.id === id);
  }

  /** The bridge acted on this message (a turn, a reply, an answer): it never starts anything again. */
  markSeen(given: string): void {
    const id = storedId(given);
    if (this.seenSet.has(id)) return;
    this.seenSet.add(id);
    this.data.seen.push(id);
    while (this.data.seen.length > SEEN_LIMIT) this.seenSet.delete(this.data.seen.shift()!);
  }

  /**
   * This message started nothing (not an answerable kind, not an allowed sender, a group message without a mention,
   * busy). Kept apart from `seen`: forgetting one only means its redelivery is looked at, and ignored, again.
   */
  markIgnored(given: string): void {
    const id = storedId(given);
    if (this.seenSet.has(id) || this.ignoredSet.has(id)) return;
    this.ignoredSet.add(id);
    this.data.ignored.push(id);
    while (this.data.ignored.length > IGNORED_LIMIT) this.ignoredSet.delete(this.data.ignored.shift()!);
  }

  claim(c: Claim): void {
    this.data.in_flight.push(c);
  }

  /** The claim is done: the ID becomes seen. */
  release(id: string): void {
    this.data.in_flight = this.data.in_flight.filter((c) => c.id !== id);
    this.markSeen(id);
  }

  claimOf(id: string): Claim | undefined {
    return this.data.in_flight.find((c) => c.id === id);
  }

  claims(): readonly Claim[] {
    return this.data.in_flight;
  }

  hold(conversation: string, text: string, now: number, maxBytes: number): void {
    const list = (this.data.held[conversation] ??= []);
    list.push({ text: cutBytes(text, maxBytes), at: now });
    while (list.length > HELD_PER_CONVERSATION || sumBytes(list) > HELD_BYTES_PER_CONVERSATION) list.shift();
    let total = Object.values(this.data.held).reduce((n, l) => n + l.length, 0);
    while (total > HELD_TOTAL) {
      const oldest = Object.entries(this.data.held).sort((a, b) => (a[1][0]?.at ?? 0) - (b[1][0]?.at ?? 0))[0];
      if (!oldest) break;
      oldest[1].shift();
      if (oldest[1].length === 0) delete this.data.held[oldest[0]];
      total--;
    }
  }

  /** Held replies for a conversation (still fresh), removed from the store. Put back with `hold` if the send fails. */
  takeHeld(conversation: string, now: number): string[] {
    const list = this.data.held[conversation] ?? [];
    delete this.data.held[conversation];
    return list.filter((h) => now - h.at <= HELD_MAX_AGE_MS).map((h) => h.text);
  }

  /** Writes the state atomically; concurrent calls are serialized and each reflects the state at its turn. */
  save(): Promise<void> {
    const next = this.writing.then(() => writePrivateAtomic(this.path, JSON.stringify(this.data)));
    this.writing = next.catch(() => undefined);
    return next;
  }
}

function sumBytes(list: HeldReply[]): number {
  return list.reduce((n, h) => n + utf8Length(h.text), 0);
}

function cutBytes(s: string, max: number): string {
  if (utf8Length(s) <= max) return s;
  let out = "";
  let n = 0;
  for (const ch of s) {
    const b = utf8Length(ch);
    if (n + b > max) break;
    out += ch;
    n += b;
  }
  return out;
}
