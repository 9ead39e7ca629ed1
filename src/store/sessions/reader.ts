/**
 * Bounded, tolerant reads of a session file. Never throws on content: bad lines are counted, never silently
 * skipped, and a final line without LF is reported as `torn`. I/O failures throw `SessionError("unavailable")`.
 */
import { constants as FS, fstatSync, openSync } from "node:fs";
import { SessionError } from "./errors.js";
import { closeQuietly, readAt } from "./fdio.js";
import { decodeHeader, decodeLine, type DecodedLine, type HeaderRecord, type RecordKind, type StoredRecord } from "./records.js";
import { wellFormedText } from "../../core/text-policy.js";

/** The header line must fit in this many bytes. */
export const MAX_HEADER_BYTES = 64 * 1024;

export interface WindowBounds {
  /** Bytes of recent history read (app-service: 2 MiB). */
  maxBytes: number;
  /** Records kept from the end of that byte range (app-service: 100,000). */
  maxRecords: number;
  /**
   * The window start is rounded up to a multiple of this many bytes from the start of the file, so it moves in
   * steps rather than on every append: cursors anchored to the window survive most appends.
   */
  quantumBytes: number;
}

/** A stat-derived identity of the file contents (append-only: same size + mtime + inode ⇒ same bytes). */
export interface FileVersion {
  ino: number;
  size: number;
  mtimeMs: number;
}

export function sameVersion(a: FileVersion, b: FileVersion): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

export interface WindowSnapshot {
  header: HeaderRecord;
  version: FileVersion;
  /** Valid records in the window, file order (without the kinds a caller asked to leave out). */
  records: StoredRecord[];
  /** The seq of the first valid record in the window (left-out kinds included), or null when there is none. */
  firstSeq: number | null;
  /** Lines in the window that are not valid records (malformed JSON or shape), excluding a torn tail. */
  badLines: number;
  /** Well-formed records of kinds this version does not know (not an error). */
  unknownLines: number;
  /** The file does not end with LF: the last line was cut short (crash mid-append). */
  torn: boolean;
  /** Records before the window exist (byte or record bound): history is incomplete unless a checkpoint covers it. */
  omitted: boolean;
  /** Where a later read may continue this window; null when torn or cut by the record bound. */
  resume: ResumePoint | null;
  /**
   * The caller's resume point when it was used: `records`, `firstSeq` aside, and the line counts then cover only
   * the lines after it (`firstSeq` is still the window's). Null for a complete window.
   */
  since: ResumePoint | null;
}

/**
 * A window read up to `end`, as a later read can continue it: valid while the file (same inode) still holds the
 * same bytes before `end` (checked on the last ≤ 256 of them), the window still starts at `windowFrom`, and the
 * record bound is not reached. Opaque to callers; JSON-serializable.
 */
export interface ResumePoint {
  ino: number;
  windowFrom: number;
  end: number;
  /** Complete lines of the window up to `end` (bad and unknown ones included). */
  lines: number;
  lastSeq: number;
  firstSeq: number | null;
  tailBytes: number;
  tailHash: string;
}

/** Reads and validates the header line; returns it with the offset just after its LF. */
export async function readHeader(fd: number, size: number): Promise<{ header: HeaderRecord; end: number } | null> {
  const head = await readAt(fd, 0, Math.min(size, MAX_HEADER_BYTES));
  const nl = head.indexOf(10);
  if (nl < 0) return null;
  const header = decodeHeader(head.toString("utf8", 0, nl));
  return header ? { header, end: nl + 1 } : null;
}

/**
 * Opens a regular file read-only (synchronous, see fdio.ts; O_NONBLOCK so a FIFO planted under a session name
 * cannot block) and returns it with its version. `unavailable` when missing, unreadable or not a regular file.
 */
export function openForRead(path: string): { fd: number; version: FileVersion } {
  let fd: number;
  try {
    fd = openSync(path, FS.O_RDONLY | FS.O_NONBLOCK);
  } catch {
    throw new SessionError("unavailable");
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new SessionError("unavailable");
    return { fd, version: { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs } };
  } catch {
    closeQuietly(fd);
    throw new SessionError("unavailable");
  }
}

/**
 * Decides, from the file's current version, what the caller still needs: `true` when it already has what it needs
 * for that version (e.g. a cached projection; `readWindow` returns "unchanged" without reading), a `ResumePoint` of
 * an earlier snapshot it holds (only the lines after it are read, when still valid), or `false` (full read).
 * A plain `FileVersion` means "unchanged when the file still has exactly this version".
 */
export type ReuseCheck = FileVersion | ((version: FileVersion) => boolean | ResumePoint | Promise<boolean | ResumePoint>);

/**
 * Reads the recent window. `expectId` must match the header's session ID (else `unavailable`).
 * With `reuse`, returns "unchanged" without reading, or only what follows a resume point, as it decides.
 * Records whose kind is in `leaveOut` are validated exactly like the others (bad lines counted, seq order
 * enforced) but not returned — for callers that never look at them (replay skips tool records).
 */
export async function readWindow(
  path: string,
  expectId: string,
  bounds: WindowBounds,
  reuse?: ReuseCheck,
  leaveOut?: ReadonlySet<RecordKind>,
): Promise<WindowSnapshot | "unchanged"> {
  const { fd, version } = openForRead(path);
  try {
    const answer = reuse === undefined ? false : typeof reuse === "function" ? await reuse(version) : sameVersion(reuse, version);
    if (answer === true) return "unchanged";
    const size = version.size;
    const h = await readHeader(fd, size);
    if (h === null || h.header.session_id !== expectId) throw new SessionError("unavailable");
    let start = h.end;
    if (size - start > bounds.maxBytes) start = Math.max(start, Math.ceil((size - bounds.maxBytes) / bounds.quantumBytes) * bounds.quantumBytes);
    if (answer !== false) {
      const delta = await readAfter(fd, h.header, version, start, start > h.end, answer, bounds, leaveOut);
      if (delta !== null) return delta;
    }
    // Read one byte before `start` to know whether `start` begins a line.
    const from = start > h.end ? start - 1 : start;
    const buf = await readAt(fd, from, size - from);
    // Drop the (possibly partial) line containing `start`, unless the byte before it is LF.
    let pos = 0;
    if (from < start) {
      const nl = buf.indexOf(10);
      pos = nl < 0 ? buf.length : nl + 1;
    }
    const sc = scanLines(buf, pos, 0, bounds.maxRecords, leaveOut);
    const torn = sc.end < buf.length;
    const resume: ResumePoint | null =
      torn || sc.cut ? null : { ino: version.ino, windowFrom: start, end: size, lines: sc.lines, lastSeq: sc.lastSeq, firstSeq: sc.firstSeq, ...tailOf(buf, size - start) };
    return { header: h.header, version, records: sc.records, firstSeq: sc.firstSeq, badLines: sc.badLines, unknownLines: sc.unknownLines, torn, omitted: start > h.end || sc.cut, resume, since: null };
  } catch (e) {
    throw e instanceof SessionError ? e : new SessionError("unavailable");
  } finally {
    closeQuietly(fd);
  }
}

/** The lines after `point`, or null when the point is no longer valid for this file (the caller reads fully). */
async function readAfter(
  fd: number,
  header: HeaderRecord,
  version: FileVersion,
  start: number,
  byteOmitted: boolean,
  point: ResumePoint,
  bounds: WindowBounds,
  leaveOut?: ReadonlySet<RecordKind>,
): Promise<WindowSnapshot | null> {
  if (point.ino !== version.ino || point.windowFrom !== start || point.end > version.size || point.tailBytes > point.end - start) return null;
  const buf = await readAt(fd, point.end - point.tailBytes, version.size - (point.end - point.tailBytes));
  if (buf.length !== version.size - (point.end - point.tailBytes) || tailOf(buf.subarray(0, point.tailBytes), point.tailBytes).tailHash !== point.tailHash) return null;
  const sc = scanLines(buf, point.tailBytes, point.lastSeq, Infinity, leaveOut);
  if (point.lines + sc.lines > bounds.maxRecords) return null;
  const torn = sc.end < buf.length;
  const firstSeq = point.firstSeq ?? sc.firstSeq;
  const resume: ResumePoint | null = torn
    ? null
    : { ...point, end: version.size, lines: point.lines + sc.lines, lastSeq: sc.lastSeq, firstSeq, ...tailOf(buf, version.size - start) };
  return { header, version, records: sc.records, firstSeq, badLines: sc.badLines, unknownLines: sc.unknownLines, torn, omitted: byteOmitted, resume, since: point };
}

/**
 * The last min(256, limit) bytes of `buf` themselves (one latin1 character per byte), compared exactly. Not hashed:
 * a resume point lives only in memory, and hashing loaded node:crypto (~2–3 ms) on a fresh process's first turn.
 */
function tailOf(buf: Buffer, limit: number): { tailBytes: number; tailHash: string } {
  const n = Math.min(256, limit, buf.length);
  return { tailBytes: n, tailHash: buf.toString("latin1", buf.length - n) };
}

interface Scan {
  records: StoredRecord[];
  firstSeq: number | null;
  lastSeq: number;
  badLines: number;
  unknownLines: number;
  /** Complete lines from `pos` (before any cut). */
  lines: number;
  /** Offset just after the last LF (== buf.length unless the tail is torn). */
  end: number;
  /** More than `maxLines` lines: only the last `maxLines` were decoded. */
  cut: boolean;
}

/**
 * Decodes the complete lines of `buf` from `pos` (the last `maxLines` of them), continuing seq order after
 * `lastSeq`. Lines are split on LF bytes and decoded one by one (UTF-8 never encodes LF inside another character,
 * so this equals decoding first; ASCII-only lines stay one-byte strings, cheaper for every later pass).
 */
function scanLines(buf: Buffer, pos: number, lastSeq: number, maxLines: number, leaveOut?: ReadonlySet<RecordKind>): Scan {
  const starts: number[] = [];
  for (let nl = buf.indexOf(10, pos); nl >= 0; nl = buf.indexOf(10, pos)) {
    starts.push(pos);
    pos = nl + 1;
  }
  starts.push(pos);
  const lines = starts.length - 1;
  const first = lines > maxLines ? lines - maxLines : 0;
  const records: StoredRecord[] = [];
  let badLines = 0;
  let unknownLines = 0;
  let firstSeq: number | null = null;
  let kindAt = -2; // next `"kind":"` at or after the current line (-1: none left), searched lazily
  for (let i = first; i < lines; i++) {
    const s = starts[i] as number;
    let e = (starts[i + 1] as number) - 1;
    if (e > s && buf[e - 1] === 13) e--;
    let leftOut = false;
    if (leaveOut !== undefined) {
      if (kindAt !== -1 && kindAt < s) kindAt = buf.indexOf(KIND_KEY, s);
      leftOut = kindAt >= s && kindAt < Math.min(e, s + 128) && sniffedKindIn(buf, kindAt + KIND_KEY.length, e, leaveOut);
    }
    const d = leftOut ? validateLatin1(buf, s, e, leaveOut as ReadonlySet<RecordKind>) : decodeLine(buf.toString("utf8", s, e));
    if (d.type === "record" || d.type === "left_out") {
      // Strictly increasing seq is part of the format; a regression marks a damaged or foreign line.
      const seq = d.type === "record" ? d.record.seq : d.seq;
      if (seq <= lastSeq) badLines++;
      else {
        lastSeq = seq;
        firstSeq ??= seq;
        if (d.type === "record") records.push(d.record);
      }
    } else if (d.type === "unknown") unknownLines++;
    else badLines++;
  }
  return { records, firstSeq, lastSeq, badLines, unknownLines, lines, end: pos, cut: first > 0 };
}

/**
 * Cheap byte-level pre-filter for `leaveOut`: a `"kind":"` key near the start of the line (our writer puts it third)
 * naming a kind in `kinds`. Either answer is safe: a line flagged wrongly (e.g. a nested "kind" key) is classified
 * by `validateLatin1` exactly as `decodeLine` would and decoded normally unless it really is left out; a line not
 * flagged is decoded normally. Native searches only, so it costs little even before the JIT warms up.
 */
const KIND_KEY = Buffer.from('"kind":"', "latin1");

function sniffedKindIn(buf: Buffer, from: number, e: number, kinds: ReadonlySet<string>): boolean {
  const q = buf.indexOf(34, from); // closing quote of the kind value
  return q > from && q < Math.min(e, from + 32) && kinds.has(buf.toString("latin1", from, q));
}

/**
 * Validates a line without decoding its text as UTF-8: JSON validity, field types, `seq` and ASCII kind names are
 * the same whether the bytes are read as Latin-1 or as UTF-8 (every byte ≥ 0x80 is a string character, or an
 * error outside strings, in both readings), so the classification equals `decodeLine`'s. Only string contents
 * differ, and they are not returned; a line that turns out not to be left out is decoded properly.
 */
function validateLatin1(buf: Buffer, s: number, e: number, leaveOut: ReadonlySet<RecordKind>): DecodedLine | { type: "left_out"; seq: number } {
  const d = decodeLine(buf.toString("latin1", s, e));
  if (d.type !== "record") return d;
  if (leaveOut.has(d.record.kind)) return { type: "left_out", seq: d.record.seq };
  return decodeLine(buf.toString("utf8", s, e));
}

/**
 * State the writer needs when it opens a file: the next seq, whether the file ends without LF, and the kind of the
 * last valid record (null when there is none; the store closes a turn a dead writer left open when it is not a terminal).
 * Scans backwards from the end in 64 KiB steps (at most `maxScanBytes`) for the last valid record.
 * If none is found, the next seq is the file size (seqs are strictly increasing, not dense, and every
 * record line is longer than one byte, so no earlier record can have a seq that large).
 */
export async function readTailState(
  fd: number,
  size: number,
  headerEnd: number,
  maxScanBytes = 4 * 1024 * 1024,
): Promise<{ nextSeq: number; torn: boolean; lastKind: RecordKind | null }> {
  if (size <= headerEnd) return { nextSeq: 1, torn: false, lastKind: null };
  const lastByte = await readAt(fd, size - 1, 1);
  const torn = lastByte[0] !== 10;
  const step = 64 * 1024;
  let end = size;
  let carry = Buffer.alloc(0);
  while (end > headerEnd && size - end < maxScanBytes) {
    const start = Math.max(headerEnd, end - step);
    const chunk = Buffer.concat([await readAt(fd, start, end - start), carry]);
    // Unless we reached the header end, bytes before the first LF may be a partial line: keep them raw for the next step.
    const cut = start === headerEnd ? 0 : chunk.indexOf(10) + 1;
    if (start !== headerEnd && cut === 0) {
      carry = chunk;
      end = start;
      continue;
    }
    const lines = chunk.toString("utf8", cut).split("\n");
    for (let i = lines.length - 1; i >= 0; i--) {
      const d = decodeLine(lines[i] as string);
      if (d.type === "record") return { nextSeq: d.record.seq + 1, torn, lastKind: d.record.kind };
    }
    carry = chunk.subarray(0, Math.max(0, cut - 1));
    end = start;
  }
  return { nextSeq: Math.max(1, size), torn, lastKind: null };
}

/** Up to this many bytes are read from the start of a file for list metadata. */
export const LIST_HEAD_BYTES = 8 * 1024;

/**
 * List metadata: the header and the beginning of the first user message's text (for a title), from one bounded
 * read. The title source may be a prefix of a longer message; it is raw text (the adapter sanitizes and redacts).
 */
export async function readListHead(path: string, expectId: string): Promise<{ header: HeaderRecord; mtimeMs: number; titleSource: string | null } | null> {
  let fd: number;
  let version: FileVersion;
  try {
    ({ fd, version } = openForRead(path));
  } catch {
    return null;
  }
  try {
    const buf = await readAt(fd, 0, Math.min(version.size, LIST_HEAD_BYTES));
    const text = buf.toString("utf8");
    const nl = text.indexOf("\n");
    if (nl < 0) return null;
    const header = decodeHeader(text.slice(0, nl));
    if (header === null || header.session_id !== expectId) return null;
    return { header, mtimeMs: version.mtimeMs, titleSource: firstUserText(text.slice(nl + 1)) };
  } catch {
    return null;
  } finally {
    closeQuietly(fd);
  }
}

/** Finds the first `user` record in `text` (lines after the header) and returns its text or a decodable prefix. */
function firstUserText(text: string): string | null {
  let pos = 0;
  for (let n = 0; n < 64 && pos < text.length; n++) {
    const nl = text.indexOf("\n", pos);
    const line = nl < 0 ? text.slice(pos) : text.slice(pos, nl);
    pos = nl < 0 ? text.length : nl + 1;
    if (nl >= 0) {
      const d = decodeLine(line);
      if (d.type === "record" && d.record.kind === "user") return d.record.text;
      continue;
    }
    // Last, incomplete line: our writer emits `..."kind":"user","turn_id":"…","text":"` first; decode the prefix.
    if (!line.includes('"kind":"user"')) return null;
    const k = line.indexOf('"text":"');
    if (k < 0) return null;
    return decodeJsonStringPrefix(line.slice(k + 8));
  }
  return null;
}

/** Decodes the longest complete prefix of a JSON string body (without its opening quote). */
function decodeJsonStringPrefix(s: string): string | null {
  let i = 0;
  let lastSafe = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === '"') break;
    if (c === "\\") {
      const need = s[i + 1] === "u" ? 6 : 2;
      if (i + need > s.length) break;
      i += need;
    } else i++;
    lastSafe = i;
  }
  try {
    const v = JSON.parse('"' + s.slice(0, lastSafe) + '"') as string;
    return wellFormedText(v);
  } catch {
    return null;
  }
}

/** Records of a byte range of a session file, each with the byte offset of its line (see `readLinesBefore`). */
export interface RangeRecords {
  records: StoredRecord[];
  /** `offsets[i]`: where the line of `records[i]` starts in the file. */
  offsets: number[];
  /** The first byte the range covers: records before it exist when it is past `headerEnd`. */
  from: number;
  headerEnd: number;
}

/**
 * The complete, valid record lines that end at or before `end` (null: the end of the file), reading at most
 * `maxBytes` before it. `end` must be a line start (the header's end or just after an LF), else null (a caller's
 * stale or forged offset). A torn last line (crash mid-append) and invalid lines are skipped; nothing is written.
 * Bytes before `end` never change in an append-only file, so no lock is needed.
 */
export async function readLinesBefore(path: string, expectId: string, end: number | null, maxBytes: number): Promise<RangeRecords | null> {
  const { fd, version } = openForRead(path);
  try {
    const h = await readHeader(fd, version.size);
    if (h === null || h.header.session_id !== expectId) throw new SessionError("unavailable");
    const stop = end ?? version.size;
    if (stop < h.end || stop > version.size) return null;
    if (end !== null && stop > h.end && (await readAt(fd, stop - 1, 1))[0] !== 10) return null;
    const start = Math.max(h.end, stop - maxBytes);
    const from = start > h.end ? start - 1 : start;
    const buf = await readAt(fd, from, stop - from);
    let pos = 0;
    if (from < start) {
      const nl = buf.indexOf(10);
      pos = nl < 0 ? buf.length : nl + 1; // drop the partial line containing `start`
    }
    const first = from + pos;
    const records: StoredRecord[] = [];
    const offsets: number[] = [];
    for (let nl = buf.indexOf(10, pos); nl >= 0; nl = buf.indexOf(10, pos)) {
      let e = nl;
      if (e > pos && buf[e - 1] === 13) e--;
      const d = decodeLine(buf.toString("utf8", pos, e));
      if (d.type === "record") {
        records.push(d.record);
        offsets.push(from + pos);
      }
      pos = nl + 1;
    }
    return { records, offsets, from: first, headerEnd: h.end };
  } catch (e) {
    throw e instanceof SessionError ? e : new SessionError("unavailable");
  } finally {
    closeQuietly(fd);
  }
}
