/**
 * A fetched body as the text `web_fetch` shows the model. Contract:
 * - Encoding: a byte-order mark wins; else the `charset` of the `Content-Type` header; else, for HTML (declared, or
 *   undeclared and starting like HTML), a `<meta charset>` or `<meta http-equiv="content-type" content="…charset=…">`
 *   within the first `META_PRESCAN_BYTES` (the HTML standard's prescan window); else UTF-8. Labels are the WHATWG
 *   encodings `TextDecoder` knows (windows-1252 for `iso-8859-1`, GBK, Shift_JIS, EUC-KR…); an unknown label falls
 *   back to UTF-8, and a `<meta>` naming UTF-16 means UTF-8 (the standard's rule: the declaration itself was ASCII).
 * - HTML becomes readable text (html-text.ts).
 * - The text is made plain as command output is (core/terminal-text.ts): terminal escape sequences removed, CR/CRLF
 *   as LF, NUL and other controls as visible control pictures, so a page cannot drive the terminal of someone
 *   reading the transcript or hide text from them.
 */
import { TextDecoder } from "node:util";
import { cleanOutput } from "../../core/terminal-text.js";
import { htmlToText } from "./html-text.js";

export const META_PRESCAN_BYTES = 1024;

const HEADER_CHARSET = /charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)/i;
const META_CHARSET = /<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)/i;

function bomEncoding(body: Buffer): string | null {
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) return "utf-8";
  if (body[0] === 0xfe && body[1] === 0xff) return "utf-16be";
  if (body[0] === 0xff && body[1] === 0xfe) return "utf-16le";
  return null;
}

function decoderFor(label: string | undefined): TextDecoder | null {
  if (label === undefined) return null;
  try {
    return new TextDecoder(label);
  } catch {
    return null;
  }
}

/** The `<meta>` declared encoding in the first bytes of an HTML body, or null. */
function metaDecoder(body: Buffer): TextDecoder | null {
  const head = body.subarray(0, META_PRESCAN_BYTES).toString("latin1");
  const d = decoderFor(META_CHARSET.exec(head)?.[1]);
  return d !== null && d.encoding.startsWith("utf-16") ? new TextDecoder("utf-8") : d;
}

/** `body` decoded, converted when HTML, and made plain (see the module contract). */
export function bodyText(body: Buffer, contentType: string, url: string): string {
  const bom = bomEncoding(body);
  const headerDecoder = decoderFor(HEADER_CHARSET.exec(contentType)?.[1]);
  const start = bom === "utf-8" ? 3 : 0;
  const sniffedHtml = contentType === "" && /^\s*(<!doctype html|<html)/i.test(body.subarray(start, META_PRESCAN_BYTES).toString("latin1"));
  const isHtml = /html/i.test(contentType) || sniffedHtml;
  const decoder =
    (bom !== null ? new TextDecoder(bom) : null) ??
    headerDecoder ??
    (isHtml ? metaDecoder(body) : null) ??
    new TextDecoder("utf-8");
  const decoded = decoder.decode(body);
  return cleanOutput(isHtml ? htmlToText(decoded, url) : decoded);
}
