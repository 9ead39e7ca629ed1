/**
 * Project-level MCP servers: `mcp_servers` (or `mcpServers`) in `<cwd>/.berth/settings.json`. A repository could
 * name any command there, so they start only after the user trusts that project once; the answer is remembered in
 * `$MC_HOME/trusted-projects.json` (owner-only) with a fingerprint of the servers, so a changed list asks again.
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../../store/atomic-file.js";
import { readRegularFile } from "../../store/regular-file.js";
import { MAX_JSON_FILE_BYTES } from "../../store/settings/locked-json.js";
import { terminalSafe } from "../terminal-safe.js";

export interface McpDef {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface ProjectMcp {
  servers: Record<string, McpDef>;
  fingerprint: string;
  trusted: boolean;
}

const trustPath = (home: string): string => join(home, "trusted-projects.json");

async function readTrust(home: string): Promise<Record<string, string>> {
  try {
    const v = JSON.parse(await readFile(trustPath(home), "utf8")) as { projects?: Record<string, unknown> };
    const out: Record<string, string> = {};
    for (const [k, f] of Object.entries(v.projects ?? {})) if (typeof f === "string") out[k] = f;
    return out;
  } catch {
    return {};
  }
}

/** The project's MCP servers (null when it declares none or its file cannot be read) and whether they are trusted. */
export async function projectMcp(home: string, cwd: string): Promise<ProjectMcp | null> {
  let raw: unknown;
  try {
    // Non-blocking and checked first: a FIFO a repository plants there is skipped, never waited on.
    raw = JSON.parse((await readRegularFile(join(cwd, ".berth", "settings.json"), MAX_JSON_FILE_BYTES)).toString("utf8"));
  } catch {
    return null;
  }
  const r = raw as Record<string, unknown> | null;
  const src = (r?.["mcp_servers"] ?? r?.["mcpServers"]) as Record<string, unknown> | undefined;
  if (typeof src !== "object" || src === null || Object.keys(src).length === 0) return null;
  const servers: Record<string, McpDef> = {};
  for (const [name, d] of Object.entries(src)) {
    const o = d as Record<string, unknown> | null;
    if (typeof o?.["command"] !== "string" || o["command"] === "") continue;
    const args = Array.isArray(o["args"]) ? (o["args"] as unknown[]).filter((a): a is string => typeof a === "string") : [];
    const env = typeof o["env"] === "object" && o["env"] !== null ? Object.fromEntries(Object.entries(o["env"] as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string")) : {};
    servers[name] = { command: o["command"], args, env };
  }
  if (Object.keys(servers).length === 0) return null;
  // Loaded here, for a project that declares servers: node:crypto costs ~3 ms to load, before the first token of a
  // chat that a daemon serves (which needs nothing else of it).
  const { createHash } = await import("node:crypto");
  const fingerprint = createHash("sha256").update(JSON.stringify(servers)).digest("hex").slice(0, 32);
  return { servers, fingerprint, trusted: (await readTrust(home))[cwd] === fingerprint };
}

/** Remembers that the user trusts this project's current MCP servers. */
export async function trustProject(home: string, cwd: string, fingerprint: string): Promise<void> {
  const projects = { ...(await readTrust(home)), [cwd]: fingerprint };
  await mkdir(home, { recursive: true, mode: 0o700 });
  await writeFileAtomic(trustPath(home), JSON.stringify({ projects }, null, 2) + "\n");
}

/** One line per server for the trust question. */
export function describeServers(servers: Record<string, McpDef>): string[] {
  // A repository wrote these: shown without terminal controls, so nothing can hide a command from the question.
  return Object.entries(servers).map(([n, d]) => {
    const cmd = [d.command, ...d.args].join(" ");
    return terminalSafe(`  ${n}: ${cmd.length > 160 ? `${cmd.slice(0, 159)}…` : cmd}`, false);
  });
}
