/**
 * Cryptographically random bytes, UUIDs and opaque IDs without loading node:crypto, whose load (~2–3 ms of module
 * compilation) used to sit on a fresh process's first `session.create` / `session.start` and first turn (issue 19).
 * The bytes come from the kernel's CSPRNG, /dev/urandom (the generator getrandom(2) and OpenSSL's own seeding draw
 * from), read 4 KiB at a time into a pool; each byte is handed out once, so an ID is as unguessable as one from
 * `crypto.randomBytes` (which itself serves `randomUUID` from a cache). Where /dev/urandom cannot be read (another
 * OS, a sandbox without /dev), the Web Crypto global's `getRandomValues` (the same CSPRNG as node:crypto, loaded only
 * then) fills the pool instead. No node:module either: its load (~0.4 ms, for a `createRequire` that only this
 * fallback used) sat inside a fresh `berth stdio`'s `session.start`.
 */
import { closeSync, openSync, readSync } from "node:fs";

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let used = 0;

/** Fills `buf` from /dev/urandom; false when it cannot (then the caller uses node:crypto). */
function fromUrandom(buf: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync("/dev/urandom", "r");
  } catch {
    return false;
  }
  try {
    for (let off = 0; off < buf.length; ) {
      const n = readSync(fd, buf, off, buf.length - off, null);
      if (n <= 0) return false;
      off += n;
    }
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** `getRandomValues` fills at most 65,536 bytes per call (QuotaExceededError beyond). */
const WEB_CRYPTO_CHUNK = 65_536;

function fill(buf: Buffer): void {
  if (fromUrandom(buf)) return;
  for (let off = 0; off < buf.length; off += WEB_CRYPTO_CHUNK) globalThis.crypto.getRandomValues(buf.subarray(off, Math.min(off + WEB_CRYPTO_CHUNK, buf.length)));
}

/** `n` fresh random bytes (a copy the caller owns). */
export function randomBytes(n: number): Buffer {
  if (n > POOL_BYTES) {
    const big = Buffer.allocUnsafe(n);
    fill(big);
    return big;
  }
  if (used + n > pool.length) {
    pool = Buffer.allocUnsafe(POOL_BYTES);
    fill(pool);
    used = 0;
  }
  const out = Buffer.from(pool.subarray(used, used + n));
  pool.fill(0, used, used + n); // handed out once: not left in the pool
  used += n;
  return out;
}

/** A version 4 UUID (RFC 9562), as `crypto.randomUUID()` returns it. */
export function randomUUID(): string {
  const b = randomBytes(16);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** `prefix` + 128 random bits in URL-safe base64 (22 characters). */
export function randomId(prefix: string): string {
  return `${prefix}${randomBytes(16).toString("base64url")}`;
}
