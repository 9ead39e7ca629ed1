/**
 * Replay cursors: `c1.<session tag>.<prefix length base36>.<64-bit prefix hash>`. The hash chains every projected
 * item (kind, role/status, part, last_part, text) from a seed derived from the session ID, so a cursor is valid
 * exactly while the projection keeps the same prefix. Pure and deterministic: changing anything here changes every
 * cursor (bump the sidecar format in the store when it does).
 */
import type { Projection, ReplayItem } from "./replay-model.js";

function hashInto(h1: number, h2: number, s: string): [number, number] {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
    h2 ^= h2 >>> 13;
  }
  // Per-item finalization so item boundaries matter.
  h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b);
  h2 = Math.imul(h2 ^ (h2 >>> 15), 0xc2b2ae35);
  return [h1 >>> 0, h2 >>> 0];
}

/**
 * The hashed key of an item is `t␀<status>`, `s␀<part>␀<0|1>␀<text>` or `m␀<role>␀<part>␀<0|1>␀<text>`
 * (␀ = U+0000). `chain` feeds the key's pieces through the same per-character steps as `hashInto` without
 * building the concatenation (which would copy every text once more).
 */
function itemKeyHead(it: ReplayItem): string {
  switch (it.kind) {
    case "terminal":
      return `t\u0000${it.status}`;
    case "summary":
      return `s\u0000${it.part}\u0000${it.last_part ? 1 : 0}\u0000`;
    case "message":
      return `m\u0000${it.role}\u0000${it.part}\u0000${it.last_part ? 1 : 0}\u0000`;
  }
}

function seed(sessionId: string): [number, number] {
  return hashInto(0x811c9dc5, 0x9747b28c, `berth-replay-v1\u0000${sessionId}`);
}

export function chain(sessionId: string, items: ReplayItem[]): Uint32Array {
  const out = new Uint32Array(2 * (items.length + 1));
  [out[0], out[1]] = seed(sessionId);
  chainInto(out, 0, items);
  return out;
}

/** Fills `out` after position `at` (whose lanes are set) with the hashes of `items`. */
export function chainInto(out: Uint32Array, at: number, items: ReplayItem[]): void {
  let h1 = out[2 * at] as number;
  let h2 = out[2 * at + 1] as number;
  for (let i = 0; i < items.length; i++) {
    const it = items[i] as ReplayItem;
    for (let k = 0; k < 2; k++) {
      const s = k === 0 ? itemKeyHead(it) : it.kind === "terminal" ? "" : it.text;
      for (let j = 0; j < s.length; j++) {
        const c = s.charCodeAt(j);
        h1 = Math.imul(h1 ^ c, 0x01000193);
        h2 = Math.imul(h2 ^ c, 0x5bd1e995);
        h2 ^= h2 >>> 13;
      }
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b) >>> 0;
    h2 = Math.imul(h2 ^ (h2 >>> 15), 0xc2b2ae35) >>> 0;
    out[2 * (at + i) + 2] = h1;
    out[2 * (at + i) + 3] = h2;
  }
}

function hex8(n: number): string {
  return n.toString(16).padStart(8, "0");
}

function tag(sessionId: string): string {
  return hex8(seed(sessionId)[0]);
}

/** The cursor after the first `n` items of `p`. */
export function cursorAt(p: Projection, n: number): string {
  return `c1.${tag(p.sessionId)}.${n.toString(36)}.${hex8(p.prefix[2 * n] as number)}${hex8(p.prefix[2 * n + 1] as number)}`;
}

const CURSOR_RE = /^c1\.([0-9a-f]{8})\.([0-9a-z]{1,8})\.([0-9a-f]{16})$/;

/** The prefix length a cursor denotes in `p`, or null when it does not match the current projection. */
export function resolveCursor(p: Projection, cursor: string): number | null {
  const m = CURSOR_RE.exec(cursor);
  if (!m || m[1] !== tag(p.sessionId)) return null;
  const n = parseInt(m[2] as string, 36);
  if (!Number.isSafeInteger(n) || n > p.count) return null;
  return cursorAt(p, n) === cursor ? n : null;
}
