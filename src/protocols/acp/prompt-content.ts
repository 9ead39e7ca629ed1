/**
 * ACP prompt content → a Berth prompt: one text plus images.
 *
 * Contracts (Berth's choices; ACP leaves the rendering to the agent):
 * - `text` blocks are joined with a blank line between them, in order.
 * - `resource_link`: a line `[linked resource: <name> <uri>]` (a `file://` URI is given as its absolute path), so the
 *   model can open it with its tools.
 * - `resource` (embedded, `embeddedContext`): text contents become a fenced block headed by the URI (the fence
 *   longer than any backtick run in the text); binary
 *   contents a line naming the URI and MIME type (the bytes are not sent to the model).
 * - Names, URIs and MIME types stay on their one line: each control character in them (C0 and C1, DEL, the
 *   bidirectional controls, U+2028/U+2029) is shown as `<U+XXXX>`, and a `file://` URI whose path would hold one is
 *   given as the URI itself (percent-encoded), not decoded. A resource's text is passed as it is.
 * - `image`: passed to the model as an image (a model that takes no images gets a placeholder line, the runtime's
 *   rule). `audio` is refused with `-32602` (not advertised).
 * - An empty prompt (no text at all and no image) is refused with `-32602`.
 * - Bounds (each `-32602`, checked before anything runs): the rendered text at most `MAX_PROMPT_TEXT_BYTES` (kept
 *   while rendering: a prompt far past it is refused without being rendered whole); at most
 *   `MAX_PROMPT_IMAGES` images, each PNG, JPEG, GIF or WebP of at most `MAX_IMAGE_BYTES` decoded bytes, together at
 *   most `MAX_PROMPT_IMAGE_BYTES`; an image's data must be padded base64 whose bytes start as its MIME type's format
 *   does.
 */
import { fileURLToPath } from "node:url";
import type { ContentBlock } from "@agentclientprotocol/sdk";
import { RequestError } from "@agentclientprotocol/sdk";
import { MAX_IMAGE_BYTES } from "../../runtime/session/index.js";
import { utf8Length } from "../../core/utf8.js";
import { visibleOnOneLine as oneLine } from "../../core/visible-controls.js";
import { ACP_ERRORS } from "./errors.js";

export const MAX_PROMPT_TEXT_BYTES = 1024 * 1024;
export const MAX_PROMPT_IMAGES = 8;
/** All of a prompt's images together, decoded: with the text, the prompt's message stays under wire.ts's line limit. */
export const MAX_PROMPT_IMAGE_BYTES = 32 * 1024 * 1024;
export { MAX_IMAGE_BYTES };
/** Each accepted image type and whether decoded bytes start as that format does. */
const IMAGE_SIGNATURES: Record<string, (b: Buffer) => boolean> = {
  "image/png": (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  "image/jpeg": (b) => b.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff])),
  "image/gif": (b) => ["GIF87a", "GIF89a"].includes(b.subarray(0, 6).toString("latin1")),
  "image/webp": (b) => b.subarray(0, 4).toString("latin1") === "RIFF" && b.subarray(8, 12).toString("latin1") === "WEBP",
};
/** Padded base64 (a flat character class: no backtracking over megabytes). */
const isBase64 = (s: string): boolean => s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);

const invalid = (what: string): RequestError => new RequestError(-32602, `Invalid params: ${what}`);

/** Whitespace (what `\s` matches, dropped before decoding): the ASCII ones compared, the rare others matched. */
const isSpace = (c: number, ch: () => string): boolean => c === 0x20 || (c >= 0x09 && c <= 0x0d) || (c > 0x7f && /\s/.test(ch()));

/**
 * Decoded size of base64 text (padding and whitespace excluded), counted in one pass over it: nothing is decoded or
 * copied, so an image far past its bound costs no memory to refuse.
 */
function base64Bytes(data: string): number {
  let chars = 0;
  for (let i = 0; i < data.length; i++) {
    const c = data.charCodeAt(i);
    if (c !== 0x3d && !isSpace(c, () => data.charAt(i))) chars++;
  }
  return Math.floor((chars * 3) / 4);
}

const textTooLarge = (): RequestError => invalid(`the prompt's text (with embedded resources) is larger than ${MAX_PROMPT_TEXT_BYTES} bytes`);

/** The longest run of the UTF-16 unit `unit` in `s` (one pass, nothing allocated). */
function longestRun(s: string, unit: number): number {
  let best = 0;
  let run = 0;
  for (let i = 0; i < s.length; i++) {
    run = s.charCodeAt(i) === unit ? run + 1 : 0;
    if (run > best) best = run;
  }
  return best;
}

export interface PromptImage {
  mediaType: string;
  dataBase64: string;
}

export interface BerthPrompt {
  text: string;
  images: PromptImage[];
}

function displayUri(uri: string): string {
  if (!uri.startsWith("file://")) return oneLine(uri);
  try {
    const path = fileURLToPath(uri);
    return oneLine(path) !== path ? oneLine(uri) : path;
  } catch {
    return oneLine(uri);
  }
}

export function toBerthPrompt(blocks: ContentBlock[]): BerthPrompt {
  const parts: string[] = [];
  const images: PromptImage[] = [];
  let imageBytes = 0;
  // The text bound is kept as the prompt is rendered, part by part (a part and the blank line before it), so a
  // prompt far past it is refused before the rest of it is rendered; each field is first checked against the most
  // it can be and still fit, so no oversized field is scanned or copied.
  let textBytes = 0;
  const add = (part: string): void => {
    textBytes += (parts.length > 0 ? 2 : 0) + (part.length > MAX_PROMPT_TEXT_BYTES ? MAX_PROMPT_TEXT_BYTES + 1 : utf8Length(part));
    if (textBytes > MAX_PROMPT_TEXT_BYTES) throw textTooLarge();
    parts.push(part);
  };
  /** A field that renders at least as long as it is; a URI at least a third as long (a file path decodes `%XX`). */
  const fits = (s: string, shrinks = 1): string => {
    if (s.length > shrinks * MAX_PROMPT_TEXT_BYTES + 16) throw textTooLarge();
    return s;
  };
  for (const b of blocks) {
    switch (b.type) {
      case "text":
        add(b.text);
        break;
      case "resource_link":
        add(`[linked resource: ${oneLine(fits(b.name))} ${displayUri(fits(b.uri, 3))}]`);
        break;
      case "resource": {
        const r = b.resource;
        if ("text" in r) {
          // A fence longer than any backtick run inside, so a Markdown file's own code blocks cannot end it early.
          const fence = "`".repeat(Math.max(3, longestRun(fits(r.text), 0x60) + 1));
          add(`Contents of ${displayUri(fits(r.uri, 3))}:\n${fence}\n${r.text}\n${fence}`);
        }
        else add(`[attached binary resource ${displayUri(fits(r.uri, 3))}${r.mimeType ? ` (${oneLine(fits(r.mimeType))})` : ""}; its bytes are not shown]`);
        break;
      }
      case "image":
        if (!Object.hasOwn(IMAGE_SIGNATURES, b.mimeType)) throw invalid("images must be PNG, JPEG, GIF or WebP");
        if (images.length === MAX_PROMPT_IMAGES) throw invalid(`a prompt takes at most ${MAX_PROMPT_IMAGES} images`);
        // Sized before anything is decoded or copied (the data may be tens of MiB of whitespace-wrapped base64).
        const bytes = base64Bytes(b.data);
        if (bytes > MAX_IMAGE_BYTES) throw invalid(`an image is larger than ${MAX_IMAGE_BYTES} bytes`);
        imageBytes += bytes;
        if (imageBytes > MAX_PROMPT_IMAGE_BYTES) throw invalid(`a prompt's images together are larger than ${MAX_PROMPT_IMAGE_BYTES} bytes`);
        // Checked here, not by the provider after the prompt was stored: bad data would fail the turn, not this request.
        // Copied (once, within the bound) only when it holds whitespace.
        const data = /\s/.test(b.data) ? b.data.replace(/\s/g, "") : b.data;
        if (data === "" || !isBase64(data)) throw invalid("an image's data is not valid base64");
        if (!IMAGE_SIGNATURES[b.mimeType]!(Buffer.from(data.slice(0, 16), "base64"))) throw invalid("an image's bytes are not of the type its mimeType names");
        images.push({ mediaType: b.mimeType, dataBase64: data });
        break;
      case "audio":
      default:
        throw ACP_ERRORS.unsupportedContent(b.type);
    }
  }
  const text = parts.join("\n\n");
  if (text.trim() === "" && images.length === 0) throw invalid("the prompt has no text and no image");
  return { text, images };
}
