/** AES-128-ECB with PKCS#7 padding, as the WeChat CDN stores media. */
import { createCipheriv, createDecipheriv } from "node:crypto";

export function encryptEcb(plain: Uint8Array, key: Uint8Array): Buffer {
  const c = createCipheriv("aes-128-ecb", key, null);
  return Buffer.concat([c.update(plain), c.final()]);
}

export function decryptEcb(cipher: Uint8Array, key: Uint8Array): Buffer {
  const d = createDecipheriv("aes-128-ecb", key, null);
  return Buffer.concat([d.update(cipher), d.final()]);
}

/** Ciphertext size for a plaintext size (PKCS#7 always adds 1..16 bytes). */
export function cipherSize(raw: number): number {
  return Math.ceil((raw + 1) / 16) * 16;
}

/**
 * The media key: `image_item.aeskey` (32 hex chars) first, else `media.aes_key` as base64 of the 16 raw bytes or of
 * the 32-char hex string. Null means the bytes are not encrypted. Anything else is malformed (throws).
 */
export function parseAesKey(hexKey: unknown, b64Key: unknown): Buffer | null {
  if (typeof hexKey === "string" && /^[0-9a-fA-F]{32}$/.test(hexKey)) return Buffer.from(hexKey, "hex");
  if (typeof b64Key === "string" && b64Key !== "") {
    const raw = Buffer.from(b64Key, "base64");
    if (raw.length === 16) return raw;
    const s = raw.toString("latin1");
    if (/^[0-9a-fA-F]{32}$/.test(s)) return Buffer.from(s, "hex");
    throw new Error("malformed media key");
  }
  return null;
}
