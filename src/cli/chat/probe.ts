/**
 * `/tools` and `/mcp`: SCV has no tool listing, so the chat builds the same tool registry the session uses (same
 * built-ins, same MCP server definitions) in its own process, reads the tools and each MCP server's state, and
 * closes it (the servers it started stop). The session's own copies of the servers are separate processes.
 */
import type { McpServerDef } from "../../store/settings/schema.js";
import { createToolRegistry } from "../../runtime/tools/registry.js";
import type { Style } from "./render.js";

export interface Probe {
  tools: Array<{ name: string; risk: string; server: string | null; description: string }>;
  servers: Array<{ name: string; state: string; tools: number; error: string | null }>;
}

export async function probeTools(cwd: string, mcpServers: Record<string, McpServerDef>): Promise<Probe> {
  const reg = await createToolRegistry({ cwd, mcpServers });
  try {
    return {
      tools: reg.tools.map((t) => ({ name: t.spec.name, risk: t.risk, server: t.serverName ?? null, description: t.spec.description.split("\n")[0]!.slice(0, 100) })),
      servers: reg.mcpServers.map((s) => ({ name: s.name, state: s.state, tools: s.toolCount, error: s.error ?? null })),
    };
  } finally {
    await reg.close();
  }
}

/** `/tools` (every tool, its risk class and whether it asks) and `/mcp` (each server's state) as display lines. */
export function probeLines(p: Probe, o: { mcpOnly: boolean; yolo: boolean; s: Style }): string[] {
  const out: string[] = [];
  if (!o.mcpOnly) for (const t of p.tools) out.push(`  ${t.name.padEnd(24)} ${o.s.dim(`${t.risk}${o.yolo || t.risk === "read_only" ? "" : " · asks"}  ${t.description}`)}`);
  for (const sv of p.servers)
    out.push(`  ${o.s.bold(sv.name)}: ${sv.state === "ready" ? `ready, ${sv.tools} tool${sv.tools === 1 ? "" : "s"}` : o.s.red(`${sv.state}${sv.error !== null ? ` (${sv.error})` : ""}`)}`);
  return out;
}
