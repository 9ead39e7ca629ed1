/**
 * The MCP tool-list cache: the tools a server listed the last time it started, so a session can offer them while
 * the server is starting again (tools/registry.ts). Contracts:
 * - One file per server definition and cwd: `<dir>/<sha256 of [command, args, env, cwd]>.json`, owner-only
 *   (directory 0700, file 0600), written atomically (temporary file, then rename). The key is a hash, so the
 *   definition's `env` values never reach the file; the file holds the tools (name, description, input schema).
 * - Bounded: at most `MAX_CACHED_TOOLS` tools and `MAX_CACHE_FILE_BYTES` per file; a bigger list is not cached, and
 *   a list holding a tool whose input schema is past json-schema.ts's bounds reads as no cache.
 * - Never throws: an unreadable, malformed or oversized file reads as "no cache"; a failed write is ignored (the
 *   cache only saves a wait).
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { McpServerDef } from "../../store/settings/schema.js";
import type { ListedTool } from "./mcp.js";
import { schemaFits } from "./json-schema.js";

export const MAX_CACHED_TOOLS = 512;
export const MAX_CACHE_FILE_BYTES = 1024 * 1024;

export interface McpToolCache {
  read(def: McpServerDef, cwd: string): ListedTool[] | null;
  write(def: McpServerDef, cwd: string, tools: readonly ListedTool[]): void;
}

function keyOf(def: McpServerDef, cwd: string): string {
  return createHash("sha256").update(JSON.stringify([def.command, def.args, def.env, cwd])).digest("hex");
}

function isListed(v: unknown): v is ListedTool {
  if (typeof v !== "object" || v === null) return false;
  const t = v as Record<string, unknown>;
  return (
    typeof t.name === "string" &&
    (t.description === undefined || typeof t.description === "string") &&
    typeof t.inputSchema === "object" &&
    t.inputSchema !== null &&
    !Array.isArray(t.inputSchema) &&
    // The live list leaves such a tool out (mcp.ts); a cached one must not bring it back.
    schemaFits(t.inputSchema)
  );
}

/** A cache under `dir` (Berth uses `<MC_HOME>/state/mcp-tools`). */
export function mcpToolCache(dir: string): McpToolCache {
  return {
    read(def, cwd) {
      try {
        const text = readFileSync(join(dir, `${keyOf(def, cwd)}.json`), "utf8");
        if (Buffer.byteLength(text) > MAX_CACHE_FILE_BYTES) return null;
        const v: unknown = JSON.parse(text);
        if (typeof v !== "object" || v === null || !Array.isArray((v as { tools?: unknown }).tools)) return null;
        const tools = (v as { tools: unknown[] }).tools;
        return tools.length <= MAX_CACHED_TOOLS && tools.every(isListed) ? tools : null;
      } catch {
        return null;
      }
    },
    write(def, cwd, tools) {
      const text = JSON.stringify({ tools });
      if (tools.length > MAX_CACHED_TOOLS || Buffer.byteLength(text) > MAX_CACHE_FILE_BYTES) return;
      const file = join(dir, `${keyOf(def, cwd)}.json`);
      const tmp = `${file}.${randomBytes(6).toString("hex")}.tmp`;
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        writeFileSync(tmp, text, { mode: 0o600 });
        renameSync(tmp, file);
      } catch {
        try {
          unlinkSync(tmp);
        } catch {
          // never created
        }
      }
    },
  };
}
