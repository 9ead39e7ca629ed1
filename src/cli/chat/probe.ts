/**
 * `/tools` and `/mcp`: SCV v3 has no frame listing a session's tools or its MCP servers' states, so the chat builds
 * the same kind of tool registry a session builds (the same built-ins, `read_skill` and `web_fetch`, the same MCP
 * server definitions, in the session's cwd) in its own process, reads the tools and each server's state, and closes
 * it (the servers it started stop). It is a local check, labelled so where it is shown: the session's own servers
 * are separate processes, and one can fail where the other started.
 */
import { homedir } from "node:os";
import type { McpServerDef } from "../../store/settings/schema.js";
import { createToolRegistry } from "../../runtime/tools/registry.js";
import { SkillCatalog } from "../../runtime/tools/skills.js";
import type { Style } from "./render.js";

export interface Probe {
  tools: Array<{ name: string; risk: string; server: string | null; description: string }>;
  servers: Array<{ name: string; state: string; tools: number; error: string | null }>;
}

export async function probeTools(cwd: string, mcpServers: Record<string, McpServerDef>, home: string): Promise<Probe> {
  const skills = new SkillCatalog({ mcHome: home, userHome: process.env["HOME"] ?? homedir() });
  const reg = await createToolRegistry({ cwd, mcpServers, skills, webFetch: {} });
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
