/**
 * ACP prompt content → a Berth prompt: one text plus images.
 *
 * Contracts (Berth's choices; ACP leaves the rendering to the agent):
 * - `text` blocks are joined with a blank line between them, in order.
 * - `resource_link`: a line `[linked resource: <name> <uri>]` (a `file://` URI is given as its absolute path), so the
 *   model can open it with its tools.
 * - `resource` (embedded, `embeddedContext`): text contents become a fenced block headed by the URI; binary
 *   contents a line naming the URI and MIME type (the bytes are not sent to the model).
 * - `image`: passed to the model as an image (a model that takes no images gets a placeholder line, the runtime's
 *   rule). `audio` is refused with `-32602` (not advertised).
 * - An empty prompt (no text at all and no image) is refused with `-32602`.
 */
import { fileURLToPath } from "node:url";
import type { ContentBlock } from "@agentclientprotocol/sdk";
import { RequestError } from "@agentclientprotocol/sdk";
import { ACP_ERRORS } from "./errors.js";

export interface PromptImage {
  mediaType: string;
  dataBase64: string;
}

export interface BerthPrompt {
  text: string;
  images: PromptImage[];
}

function displayUri(uri: string): string {
  if (!uri.startsWith("file://")) return uri;
  try {
    return fileURLToPath(uri);
  } catch {
    return uri;
  }
}

export function toBerthPrompt(blocks: ContentBlock[]): BerthPrompt {
  const parts: string[] = [];
  const images: PromptImage[] = [];
  for (const b of blocks) {
    switch (b.type) {
      case "text":
        parts.push(b.text);
        break;
      case "resource_link":
        parts.push(`[linked resource: ${b.name} ${displayUri(b.uri)}]`);
        break;
      case "resource": {
        const r = b.resource;
        if ("text" in r) parts.push(`Contents of ${displayUri(r.uri)}:\n\`\`\`\n${r.text}\n\`\`\``);
        else parts.push(`[attached binary resource ${displayUri(r.uri)}${r.mimeType ? ` (${r.mimeType})` : ""}; its bytes are not shown]`);
        break;
      }
      case "image":
        images.push({ mediaType: b.mimeType, dataBase64: b.data });
        break;
      default:
        throw ACP_ERRORS.unsupportedContent(b.type);
    }
  }
  const text = parts.join("\n\n");
  if (text.trim() === "" && images.length === 0) throw new RequestError(-32602, "Invalid params: the prompt has no text and no image");
  return { text, images };
}
