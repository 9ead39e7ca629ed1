/**
 * The pixel size an identity image (v14 `profile_image_changed`) states in its own header, read from the few
 * fields that carry it; no pixel is decoded. Contract: `imageHeader(mimeType, bytes)` returns the stated
 * `{width, height}`, or why the bytes are not an image of that type. A GIF's frames are walked too, and
 * one outside the logical screen is refused: decoders grow the canvas to fit a first frame larger than
 * the screen, so the screen alone would not bound what clients allocate.
 */

export interface ImageSize {
  width: number;
  height: number;
}
type Reader = (b: Buffer) => ImageSize | string;

/** The format's name as error messages give it. */
export const IMAGE_FORMAT: Record<string, string> = { "image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP" };

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The signature, then the chunk PNG requires first: length 13, type IHDR, width and height first in it. */
function png(b: Buffer): ImageSize | string {
  if (b.length < 24 || !b.subarray(0, 8).equals(PNG_SIGNATURE)) return "no PNG signature";
  if (b.readUInt32BE(8) !== 13 || b.toString("latin1", 12, 16) !== "IHDR" || b.length < 33) return "its first chunk is not a 13-byte IHDR";
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** Start-of-frame markers (baseline, extended, progressive, lossless; Huffman or arithmetic). */
const SOF = new Set([0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf]);

/** SOI, then marker segments up to the first frame header (SOFn: precision, height, width). */
function jpeg(b: Buffer): ImageSize | string {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return "no JPEG start-of-image marker";
  let p = 2;
  while (p < b.length) {
    if (b[p] !== 0xff) return "a JPEG segment does not begin with a marker";
    while (b[p] === 0xff) p++; // fill bytes
    if (p >= b.length) break;
    const m = b[p++]!;
    if ((m >= 0xd0 && m <= 0xd7) || m === 0x01) continue; // standalone markers
    if (m === 0x00) return "a JPEG segment does not begin with a marker";
    if (m === 0xd9 || m === 0xda) return "it has no frame header (SOF) before its image data";
    if (p + 2 > b.length) break;
    const length = b.readUInt16BE(p);
    if (length < 2) return "a JPEG segment length is below 2";
    if (SOF.has(m)) {
      if (length < 8 || p + 7 > b.length) break;
      return { width: b.readUInt16BE(p + 5), height: b.readUInt16BE(p + 3) };
    }
    p += length;
  }
  return "it ends before its frame header (SOF)";
}

/** Bytes of a colour table announced by a GIF packed field (none when its top bit is clear). */
const colourTable = (packed: number): number => (packed & 0x80 ? 3 * 2 ** ((packed & 7) + 1) : 0);
/** The offset after the data sub-blocks starting at `p`, or -1 when the bytes end first. */
function skipSubBlocks(b: Buffer, p: number): number {
  for (;;) {
    if (p >= b.length) return -1;
    const n = b[p]!;
    p += 1 + n;
    if (n === 0) return p;
  }
}

/** The logical screen descriptor, then every block up to the trailer: each frame must lie on the screen. */
function gif(b: Buffer): ImageSize | string {
  const sig = b.toString("latin1", 0, 6);
  if (b.length < 13 || (sig !== "GIF87a" && sig !== "GIF89a")) return "no GIF87a/GIF89a signature";
  const width = b.readUInt16LE(6);
  const height = b.readUInt16LE(8);
  let p = 13 + colourTable(b[10]!);
  let frames = 0;
  const truncated = "it ends before its trailer";
  for (;;) {
    if (p >= b.length) return truncated;
    const block = b[p++]!;
    if (block === 0x3b) break;
    if (block === 0x21) {
      p = skipSubBlocks(b, p + 1); // after the extension's label
      if (p < 0) return truncated;
      continue;
    }
    if (block !== 0x2c) return `it has an unknown block (0x${block.toString(16)})`;
    if (p + 9 > b.length) return truncated;
    const [left, top, w, h] = [b.readUInt16LE(p), b.readUInt16LE(p + 2), b.readUInt16LE(p + 4), b.readUInt16LE(p + 6)];
    frames++;
    if (left + w > width || top + h > height) return `frame ${frames} (${w}x${h} at ${left},${top}) lies outside the ${width}x${height} logical screen`;
    p = skipSubBlocks(b, p + 9 + colourTable(b[p + 8]!) + 1); // after the LZW minimum code size
    if (p < 0) return truncated;
  }
  return frames === 0 ? "it has no image" : { width, height };
}

/** RIFF/WEBP, then the first chunk: a VP8 key frame, a VP8L header or the VP8X canvas. */
function webp(b: Buffer): ImageSize | string {
  if (b.length < 20 || b.toString("latin1", 0, 4) !== "RIFF" || b.toString("latin1", 8, 12) !== "WEBP") return "no RIFF WEBP header";
  const fourcc = b.toString("latin1", 12, 16);
  const size = b.readUInt32LE(16);
  const d = 20;
  if (d + size > b.length) return `its ${JSON.stringify(fourcc)} chunk is truncated`;
  switch (fourcc) {
    case "VP8 ":
      if (size < 10 || (b[d]! & 1) !== 0 || b[d + 3] !== 0x9d || b[d + 4] !== 0x01 || b[d + 5] !== 0x2a) return "its VP8 chunk does not begin with a key frame header";
      return { width: b.readUInt16LE(d + 6) & 0x3fff, height: b.readUInt16LE(d + 8) & 0x3fff };
    case "VP8L": {
      if (size < 5 || b[d] !== 0x2f) return "its VP8L chunk has no lossless signature";
      const bits = b.readUInt32LE(d + 1);
      if (bits >>> 29 !== 0) return "its VP8L version is not 0";
      return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
    }
    case "VP8X":
      if (size < 10) return "its VP8X chunk is shorter than 10 bytes";
      return { width: b.readUIntLE(d + 4, 3) + 1, height: b.readUIntLE(d + 7, 3) + 1 };
    default:
      return `its first chunk (${JSON.stringify(fourcc)}) is not VP8, VP8L or VP8X`;
  }
}

const READERS: Record<string, Reader> = { "image/png": png, "image/jpeg": jpeg, "image/gif": gif, "image/webp": webp };

/** The size `bytes` state for `mimeType` (one of IMAGE_FORMAT's), or why they are not that type. */
export function imageHeader(mimeType: string, bytes: Buffer): ImageSize | string {
  const read = READERS[mimeType];
  return read ? read(bytes) : `unsupported image type ${mimeType}`;
}
