/**
 * `/tools` and `/mcp`: SCV has no tool listing, so the chat builds the same tool registry the session uses (same
 * built-ins, same MCP server definitions) in its own process, reads the tools and each MCP server's state, and
 * closes it (the servers it started stop). The session's own copies of the servers are separate processes.
 */
import type { McpServerDef } from "../../store/settings/schema.js";
import { createToolRegistry } from "../../runtime/tools/registry.js";

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
