/**
 * Model-facing names of MCP tools (no SDK import: the registry names cached tools before the SDK is loaded).
 * `mcp__<server>__<tool>`, sanitized to `[A-Za-z0-9_-]`, at most 64 characters (shortened with a hash suffix when
 * longer or colliding); across servers, unique in sorted server order.
 */
import { createHash } from "node:crypto";
import type { Tool } from "../types.js";

const MAX_NAME = 64;

/** `[A-Za-z0-9_-]` only; other characters become `_`. */
export function sanitizeName(s: string): string {
  return s.replace(/[^A-Za-z0-9_-]/g, "_");
}

/** Model-facing name for a server's tool, unique within `taken` (which it extends). */
export function mcpToolName(server: string, tool: string, taken: Set<string>): string {
  let name = `mcp__${sanitizeName(server)}__${sanitizeName(tool)}`;
  if (name.length > MAX_NAME || taken.has(name)) {
    const hash = createHash("sha256").update(`${server}\u0000${tool}`).digest("hex").slice(0, 8);
    name = `${name.slice(0, MAX_NAME - 9)}_${hash}`;
  }
  taken.add(name);
  return name;
}

/** Names are made unique in sorted server order, so they are deterministic for a given set of ready servers. */
export function mergeTools(lists: Tool[][]): Tool[] {
  const taken = new Set<string>();
  const tools: Tool[] = [];
  for (const list of lists) {
    for (const t of list) {
      const name = taken.has(t.spec.name) ? mcpToolName(t.serverName ?? "", t.spec.name, taken) : (taken.add(t.spec.name), t.spec.name);
      tools.push(name === t.spec.name ? t : { ...t, spec: { ...t.spec, name } });
    }
  }
  return tools;
}

