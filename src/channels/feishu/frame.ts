/**
 * The Feishu long connection's `pbbp2.Frame` (protobuf, proto2), encoded and decoded by hand:
 *   Frame { uint64 SeqID=1; uint64 LogID=2; int32 service=3; int32 method=4 (0 control, 1 data);
 *           repeated Header headers=5 {string key=1; string value=2}; string payloadEncoding=6;
 *           string payloadType=7; bytes payload=8; string LogIDNew=9 }
 * Decoding is bounded: truncated input, over-long varints and unknown wire types throw `FrameError`; unknown fields
 * are skipped.
 */

export interface Frame {
  seqId: bigint;
  logId: bigint;
  service: number;
  method: number;
  headers: Array<{ key: string; value: string }>;
  payloadEncoding?: string;
  payloadType?: string;
  payload?: Uint8Array;
  logIdNew?: string;
}

export class FrameError extends Error {}

export const METHOD_CONTROL = 0;
export const METHOD_DATA = 1;

function varint(out: number[], v: bigint): void {
  let x = BigInt.asUintN(64, v);
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
}

function bytesField(out: number[], field: number, b: Uint8Array): void {
  varint(out, BigInt((field << 3) | 2));
  varint(out, BigInt(b.length));
  for (const x of b) out.push(x);
}

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

export function encodeFrame(f: Frame): Uint8Array {
  const out: number[] = [];
  varint(out, 1n << 3n);
  varint(out, f.seqId);
  varint(out, 2n << 3n);
  varint(out, f.logId);
  varint(out, 3n << 3n);
  varint(out, BigInt(f.service));
  varint(out, 4n << 3n);
  varint(out, BigInt(f.method));
  for (const h of f.headers) {
    const inner: number[] = [];
    bytesField(inner, 1, enc.encode(h.key));
    bytesField(inner, 2, enc.encode(h.value));
    bytesField(out, 5, Uint8Array.from(inner));
  }
  if (f.payloadEncoding !== undefined) bytesField(out, 6, enc.encode(f.payloadEncoding));
  if (f.payloadType !== undefined) bytesField(out, 7, enc.encode(f.payloadType));
  if (f.payload !== undefined) bytesField(out, 8, f.payload);
  if (f.logIdNew !== undefined) bytesField(out, 9, enc.encode(f.logIdNew));
  return Uint8Array.from(out);
}

class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}
  get done(): boolean {
    return this.pos >= this.b.length;
  }
  varint(): bigint {
    let v = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (this.pos >= this.b.length) throw new FrameError("truncated varint");
      const x = this.b[this.pos++]!;
      v |= BigInt(x & 0x7f) << shift;
      if ((x & 0x80) === 0) return BigInt.asUintN(64, v);
    }
    throw new FrameError("varint too long");
  }
  bytes(): Uint8Array {
    const n = Number(this.varint());
    if (this.pos + n > this.b.length) throw new FrameError("truncated field");
    const s = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 2) this.bytes();
    else if (wire === 1) this.pos += 8;
    else if (wire === 5) this.pos += 4;
    else throw new FrameError(`unsupported wire type ${wire}`);
    if (this.pos > this.b.length) throw new FrameError("truncated field");
  }
}

function str(b: Uint8Array): string {
  try {
    return dec.decode(b);
  } catch {
    throw new FrameError("invalid UTF-8 in a string field");
  }
}

export function decodeFrame(b: Uint8Array): Frame {
  const r = new Reader(b);
  const f: Frame = { seqId: 0n, logId: 0n, service: 0, method: 0, headers: [] };
  while (!r.done) {
    const tag = Number(r.varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === 0) f.seqId = r.varint();
    else if (field === 2 && wire === 0) f.logId = r.varint();
    else if (field === 3 && wire === 0) f.service = Number(BigInt.asIntN(32, r.varint()));
    else if (field === 4 && wire === 0) f.method = Number(BigInt.asIntN(32, r.varint()));
    else if (field === 5 && wire === 2) {
      const h = new Reader(r.bytes());
      let key = "";
      let value = "";
      while (!h.done) {
        const t = Number(h.varint());
        if (t === ((1 << 3) | 2)) key = str(h.bytes());
        else if (t === ((2 << 3) | 2)) value = str(h.bytes());
        else h.skip(t & 7);
      }
      f.headers.push({ key, value });
    } else if (field === 6 && wire === 2) f.payloadEncoding = str(r.bytes());
    else if (field === 7 && wire === 2) f.payloadType = str(r.bytes());
    else if (field === 8 && wire === 2) f.payload = Uint8Array.from(r.bytes());
    else if (field === 9 && wire === 2) f.logIdNew = str(r.bytes());
    else r.skip(wire);
  }
  return f;
}

export function header(f: Frame, key: string): string | undefined {
  return f.headers.find((h) => h.key === key)?.value;
}
