/**
 * SHA-256 (FIPS 180-4) of a short UTF-8 string, hex, in plain JavaScript: the catalog cache names its files and
 * fingerprints provider configurations with it on every fresh process's first turn, and loading node:crypto for
 * those few hundred bytes cost ~2–3 ms of that turn (issue 19). Same digests as `createHash("sha256")` (tested);
 * for hashing large or secret data use node:crypto.
 */
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** Reused per call (the function is synchronous): no typed arrays or encoder are made per digest. */
const ENCODER = new TextEncoder();
const W = new Int32Array(64);
const H = new Int32Array(8);

/**
 * Written for V8's interpreter as much as its compilers: a first turn runs it a few times on cold code (catalog
 * fingerprint, app-service activity IDs), so words are read with shifts (no DataView calls), the state lives in
 * locals (no array destructuring) and all arithmetic stays in int32 (`| 0` after each sum, Int32Array constants):
 * in the interpreter every value above 2^31 (a uint32 read, an unsigned shift's result kept) is a heap-allocated number.
 */
export function sha256Hex(text: string): string {
  const msg = ENCODER.encode(text);
  const n = msg.length;
  const padded = new Uint8Array(((n + 9 + 63) >> 6) << 6);
  padded.set(msg);
  padded[n] = 0x80;
  const len = padded.length;
  // The message length in bits, big-endian, in the last 8 bytes.
  const hi = Math.floor(n / 0x20000000);
  const lo = (n << 3) >>> 0;
  padded[len - 8] = hi >>> 24;
  padded[len - 7] = hi >>> 16;
  padded[len - 6] = hi >>> 8;
  padded[len - 5] = hi;
  padded[len - 4] = lo >>> 24;
  padded[len - 3] = lo >>> 16;
  padded[len - 2] = lo >>> 8;
  padded[len - 1] = lo;
  const w = W;
  const h = H;
  h[0] = 0x6a09e667;
  h[1] = 0xbb67ae85;
  h[2] = 0x3c6ef372;
  h[3] = 0xa54ff53a;
  h[4] = 0x510e527f;
  h[5] = 0x9b05688c;
  h[6] = 0x1f83d9ab;
  h[7] = 0x5be0cd19;
  for (let off = 0; off < len; off += 64) {
    for (let i = 0, j = off; i < 16; i++, j += 4) w[i] = (padded[j]! << 24) | (padded[j + 1]! << 16) | (padded[j + 2]! << 8) | padded[j + 3]!;
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15]!;
      const y = w[i - 2]!;
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      w[i] = (((w[i - 16]! + s0) | 0) + ((w[i - 7]! + s1) | 0)) | 0;
    }
    let a: number = h[0];
    let b: number = h[1];
    let c: number = h[2];
    let d: number = h[3];
    let e: number = h[4];
    let f: number = h[5];
    let g: number = h[6];
    let k: number = h[7];
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (((k + S1) | 0) + ((((e & f) ^ (~e & g)) + ((K[i]! + w[i]!) | 0)) | 0)) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h[0] = (h[0] + a) | 0;
    h[1] = (h[1] + b) | 0;
    h[2] = (h[2] + c) | 0;
    h[3] = (h[3] + d) | 0;
    h[4] = (h[4] + e) | 0;
    h[5] = (h[5] + f) | 0;
    h[6] = (h[6] + g) | 0;
    h[7] = (h[7] + k) | 0;
  }
  let out = "";
  for (let i = 0; i < 8; i++) out += (h[i]! >>> 0).toString(16).padStart(8, "0");
  return out;
}
