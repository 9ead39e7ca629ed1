/**
 * Real minimal images for the v14 identity image tests, built byte by byte from each format's specification:
 * each decodes (checked in Chromium while they were written) to the size it is built with.
 */

const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b: Buffer): number {
  let c = 0xffffffff;
  for (const x of b) c = CRC[(c ^ x) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
/** A real PNG of `w`×`h`, padded with an ancillary chunk to exactly `total` bytes when given. */
export function png(w: number, hgt: number, total?: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(hgt, 4);
  ihdr.set([8, 0, 0, 0, 0], 8);
  const raw = Buffer.alloc((w + 1) * hgt);
  const head = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk("IHDR", ihdr), pngChunk("IDAT", Buffer.from([0x78, 0x01, ...deflateStored(raw)]))]);
  const end = pngChunk("IEND", Buffer.alloc(0));
  const pad = total === undefined ? [] : [pngChunk("tEXt", Buffer.alloc(total - head.length - end.length - 12, 0x61))];
  return Buffer.concat([head, ...pad, end]);
}
function deflateStored(b: Buffer): number[] {
  const out = [1, b.length & 0xff, b.length >> 8, ~b.length & 0xff, (~b.length >> 8) & 0xff, ...b];
  let a = 1;
  let s2 = 0;
  for (const x of b) {
    a = (a + x) % 65521;
    s2 = (s2 + a) % 65521;
  }
  return [...out, (s2 >> 8) & 0xff, s2 & 0xff, (a >> 8) & 0xff, a & 0xff];
}

/** LZW codes (`width` bits each) packed least significant bit first, as GIF and VP8L do. */
function packLsb(codes: Array<[value: number, width: number]>): Buffer {
  const out: number[] = [];
  let acc = 0;
  let n = 0;
  for (const [v, w] of codes) {
    acc |= v << n;
    n += w;
    while (n >= 8) {
      out.push(acc & 0xff);
      acc >>>= 8;
      n -= 8;
    }
  }
  if (n > 0) out.push(acc & 0xff);
  return Buffer.from(out);
}
const le16 = (v: number) => Buffer.from([v & 0xff, (v >> 8) & 0xff]);

/**
 * A GIF89a: a `w`×`h` logical screen with a two-colour global table and one frame (the whole screen unless
 * `frame` says otherwise), every pixel colour 0. Its LZW data sends a clear code before each pixel, so the
 * code width stays 3 bits; a frame larger than 4,096 pixels gets only its first pixels' data.
 */
export function gif(w: number, h: number, frame: { left?: number; top?: number; w?: number; h?: number } = {}): Buffer {
  const [fl, ft, fw, fh] = [frame.left ?? 0, frame.top ?? 0, frame.w ?? w, frame.h ?? h];
  const codes: Array<[number, number]> = [];
  for (let i = 0; i < Math.min(fw * fh, 4096); i++) codes.push([4, 3], [0, 3]);
  codes.push([5, 3]);
  const data = packLsb(codes);
  const blocks: Buffer[] = [];
  for (let i = 0; i < data.length; i += 255) {
    const part = data.subarray(i, i + 255);
    blocks.push(Buffer.from([part.length]), part);
  }
  return Buffer.concat([
    Buffer.from("GIF89a", "latin1"),
    le16(w), le16(h), Buffer.from([0x80, 0, 0]), // global colour table of 2 entries
    Buffer.from([0, 0, 0, 255, 255, 255]),
    Buffer.from([0x21, 0xf9, 4, 0, 0, 0, 0, 0]), // a graphic control extension, to be walked over
    Buffer.from([0x2c]), le16(fl), le16(ft), le16(fw), le16(fh), Buffer.from([0]),
    Buffer.from([2]), ...blocks, Buffer.from([0]),
    Buffer.from([0x3b]),
  ]);
}

/**
 * A baseline grayscale JPEG of `w`×`h` (JFIF): every 8×8 block is DC 0 then end of block, with one-code
 * Huffman tables, so each block costs two bits. `sof` overrides the size its frame header (SOF0) states.
 */
export function jpeg(w: number, h: number, sof: { w: number; h: number } = { w, h }): Buffer {
  const seg = (marker: number, body: Buffer) => Buffer.concat([Buffer.from([0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff]), body]);
  const be16 = (v: number) => Buffer.from([v >> 8, v & 0xff]);
  const blocks = Math.ceil(w / 8) * Math.ceil(h / 8);
  const bytes = Math.ceil((blocks * 2) / 8);
  const scan = Buffer.alloc(bytes, 0);
  const spare = bytes * 8 - blocks * 2; // padded with one bits
  if (spare > 0) scan[bytes - 1] = (1 << spare) - 1;
  const huff = (cls: number) => Buffer.concat([Buffer.from([cls]), Buffer.from([1, ...new Array<number>(15).fill(0)]), Buffer.from([0])]);
  return Buffer.concat([
    Buffer.from([0xff, 0xd8]),
    seg(0xe0, Buffer.concat([Buffer.from("JFIF\0", "latin1"), Buffer.from([1, 1, 0, 0, 1, 0, 1, 0, 0])])),
    seg(0xdb, Buffer.concat([Buffer.from([0]), Buffer.alloc(64, 1)])),
    seg(0xc0, Buffer.concat([Buffer.from([8]), be16(sof.h), be16(sof.w), Buffer.from([1, 1, 0x11, 0])])),
    seg(0xc4, huff(0x00)),
    seg(0xc4, huff(0x10)),
    seg(0xda, Buffer.from([1, 1, 0x00, 0, 63, 0])),
    scan,
    Buffer.from([0xff, 0xd9]),
  ]);
}

/** One RIFF chunk (padded to an even length). */
function riffChunk(fourcc: string, payload: Buffer): Buffer {
  const size = Buffer.alloc(4);
  size.writeUInt32LE(payload.length);
  return Buffer.concat([Buffer.from(fourcc, "latin1"), size, payload, payload.length % 2 ? Buffer.from([0]) : Buffer.alloc(0)]);
}
/** A WebP file of these chunks. */
export function webp(...chunks: Buffer[]): Buffer {
  const body = Buffer.concat(chunks);
  const size = Buffer.alloc(4);
  size.writeUInt32LE(4 + body.length);
  return Buffer.concat([Buffer.from("RIFF", "latin1"), size, Buffer.from("WEBP", "latin1"), body]);
}
/**
 * A lossless (VP8L) bitstream chunk of `w`×`h`: no transform, no colour cache, no meta codes, and five
 * one-symbol prefix codes, so every pixel is transparent black and costs no bits.
 */
export function vp8l(w: number, h: number): Buffer {
  const head = Buffer.alloc(5);
  head[0] = 0x2f;
  head.writeUInt32LE(((w - 1) | ((h - 1) << 14)) >>> 0, 1);
  const simple: Array<[number, number]> = [[1, 1], [0, 1], [0, 1], [0, 1]];
  const bits = packLsb([[0, 1], [0, 1], [0, 1], ...simple, ...simple, ...simple, ...simple, ...simple]);
  return riffChunk("VP8L", Buffer.concat([head, bits]));
}
/** The extended-format header chunk: a `w`×`h` canvas, no feature flags. */
export function vp8x(w: number, h: number): Buffer {
  const p = Buffer.alloc(10);
  p.writeUIntLE(w - 1, 4, 3);
  p.writeUIntLE(h - 1, 7, 3);
  return riffChunk("VP8X", p);
}
/** A lossy (VP8) key frame of 2×3: the bitstream Chromium's WebP encoder made for a filled 2×3 canvas. */
export function vp8(): Buffer {
  return riffChunk("VP8 ", Buffer.from("9001009d012a0200030002c04c25a00274ba00039800fee838bf8de6f35ad6fff253faeef28bb0000000", "hex"));
}
