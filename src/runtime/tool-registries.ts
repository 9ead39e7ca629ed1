/**
 * The tool registries of one agent: one per session, so sessions with different MCP servers (or working
 * directories) never restart each other's servers. Contracts:
 * - A session's registry is keyed by its configuration: cwd (its MCP servers start there), MCP server
 *   definitions, key variables scrubbed from tool environments, tool settings and web_fetch hosts. A turn whose
 *   configuration differs replaces that session's registry only; the replaced one closes (its servers stop) as
 *   soon as no turn holds it.
 * - `acquire` returns at once: the registry's MCP servers start in the background, in parallel
 *   (tools/registry.ts `openToolRegistry`); `startedAt` is when they were launched (the startup deadline counts
 *   from there, see agent.ts). A server's tool list is cached under `<home>/state/mcp-tools/` (tools/mcp-cache.ts):
 *   on its next start (same definition and cwd) its tools are offered at once and the turn does not wait for it.
 *   When every server of a registry has a cached list, none is started before its first turn's provider answered
 *   (`ToolRegistry.startMcp`, called by agent.ts), a call to one of its tools, or `MCP_DEFERRED_START_MS` after open:
 *   on a small machine, servers starting beside the first request delay its first token.
 * - A change of the settings' tool part (the `globalKey` of a configuration) retires every registry built from
 *   older settings: their servers stop once no turn holds them (a session rebuilds its registry at its next
 *   turn). At most `MAX_IDLE_MCP_REGISTRIES` registries with MCP servers stay open while no turn holds them
 *   (counted when a registry is taken, besides it); beyond that the least recently used close (a door that never closes its sessions, like the app-service,
 *   keeps a bounded number of server sets).
 * - `watch` reports every MCP state change of a session's current registry (and the registry a configuration
 *   change puts in its place); `status` is the current state of its servers; `tools` the tools it offers now.
 * - `closeSession` closes a session's registry once no turn holds it; `close` closes everything.
 */
import type { McpServerDef, ToolSettings } from "../store/settings/schema.js";
import type { EnvLike } from "../store/home.js";
import { cleanToolEnv } from "./env.js";
import type { BashOptions } from "./tools/bash.js";
import { toolPolicyFromSettings } from "./tools/policy.js";
import { openToolRegistry, type ToolRegistry } from "./tools/registry.js";
import type { SkillCatalog } from "./tools/skills.js";
import { mcpToolCache, type McpToolCache } from "./tools/mcp-cache.js";
import { join } from "node:path";
import type { ToolRisk } from "./types.js";

/** What the settings say about a session's tools (reloaded for every turn). */
export interface ToolConfig {
  mcp: Record<string, McpServerDef>;
  keyEnvs: string[];
  toolSettings: ToolSettings | undefined;
  /** Global `web_fetch.auto_approve_hosts`. */
  autoApproveHosts: string[];
  /** Identity of the settings' tool part (their MCP servers, key variables, tool settings, hosts). */
  globalKey: string;
}

/** How long servers that all have cached tool lists wait at most for a turn's provider to answer first. */
export const MCP_DEFERRED_START_MS = 250;

/** Registries with MCP servers kept open while idle, beyond which the least recently used close. */
export const MAX_IDLE_MCP_REGISTRIES = 16;

/** One MCP server of a session as a door shows it (`/mcp`). */
export interface McpServerInfo {
  name: string;
  state: "starting" | "ready" | "failed" | "closed";
  toolCount: number;
  /** Why it failed: a fixed-shape one-liner (never the server's own output). */
  error?: string;
}

/** One tool a session offers (`SessionRuntime.tools`): what `/tools` lists. */
export interface SessionToolInfo {
  name: string;
  risk: ToolRisk;
  /** The MCP server offering it; absent for a built-in. */
  server?: string;
  /** The first line of its description (at most 200 characters). */
  description: string;
}

export interface RegistryLease {
  reg: ToolRegistry;
  /** When its MCP servers were launched (`clock` time, ms). */
  startedAt: number;
  release(): void;
}

interface Entry {
  key: string;
  globalKey: string;
  hasMcp: boolean;
  reg: ToolRegistry;
  startedAt: number;
  /** Turns holding it. */
  users: number;
  /** Replaced or its session closed: closes once `users` is 0. */
  retired: boolean;
}

export interface SessionRegistriesOptions {
  /** Berth's state root (protected from the file tools; `chat_attach` outbox). */
  home: string;
  env: EnvLike;
  bash?: Omit<BashOptions, "env">;
  skills: SkillCatalog;
  clock: () => number;
  /** MCP connect budget per server (default: tools/mcp.ts). */
  mcpConnectTimeoutMs?: number;
  /** See `MCP_DEFERRED_START_MS` (the default). */
  mcpDeferredStartMs?: number;
  /** Registries with MCP servers kept open while idle (default `MAX_IDLE_MCP_REGISTRIES`). */
  maxIdleMcpRegistries?: number;
}

export function mcpInfo(reg: ToolRegistry): McpServerInfo[] {
  return reg.mcpServers.map((s) => ({ name: s.name, state: s.state, toolCount: s.toolCount, ...(s.error !== undefined ? { error: s.error } : {}) }));
}

export class SessionRegistries {
  private readonly current = new Map<string, Entry>();
  private readonly retired = new Set<Entry>();
  private readonly closing = new Set<Promise<void>>();
  private readonly watchers = new Map<string, Set<(servers: McpServerInfo[]) => void>>();
  private readonly unwatch = new Map<Entry, () => void>();
  private latestGlobal: string | null = null;
  private readonly cache: McpToolCache;

  constructor(private readonly o: SessionRegistriesOptions) {
    this.cache = mcpToolCache(join(o.home, "state", "mcp-tools"));
  }

  /** Takes `session`'s registry for this configuration (rebuilt when it changed). Pair with `release`. */
  acquire(session: string, cwd: string, c: ToolConfig): RegistryLease {
    const key = JSON.stringify({ cwd, mcp: c.mcp, keys: c.keyEnvs, tools: c.toolSettings ?? null, hosts: c.autoApproveHosts });
    if (this.latestGlobal !== c.globalKey) {
      this.latestGlobal = c.globalKey;
      for (const x of [...this.current.values()]) if (x.globalKey !== c.globalKey) void this.retire(x);
    }
    let e = this.current.get(session);
    if (e?.key !== key) {
      if (e !== undefined) void this.retire(e);
      e = this.open(session, key, cwd, c);
    } else {
      // Most recently used last (the idle bound closes from the front).
      this.current.delete(session);
      this.current.set(session, e);
    }
    e.users++;
    this.evictIdle();
    const entry = e;
    let released = false;
    return {
      reg: entry.reg,
      startedAt: entry.startedAt,
      release: () => {
        if (released) return;
        released = true;
        entry.users--;
        void this.closeIfIdle(entry);
      },
    };
  }

  private open(session: string, key: string, cwd: string, c: ToolConfig): Entry {
    // The tools' environment is built when bash first reads it, not here: walking the environment (each read of
    // process.env crosses into C++) and the secret-name patterns cost ~0.5 ms of a fresh `session.start` that a
    // session without a bash call never needs. Nothing in Berth changes process.env after start, so it is the same.
    let env: NodeJS.ProcessEnv | undefined;
    const bash = { ...this.o.bash };
    Object.defineProperty(bash, "env", { enumerable: true, get: () => (env ??= cleanToolEnv(this.o.env, c.keyEnvs, c.toolSettings?.secret_env_patterns)) });
    const mcpServers = Object.fromEntries(Object.entries(c.mcp).map(([k, d]) => [k, { ...d, env: { ...d.env } }]));
    const reg = openToolRegistry(
      {
        cwd,
        mcpServers,
        bash,
        policy: toolPolicyFromSettings(c.toolSettings, this.o.home),
        skills: this.o.skills,
        webFetch: { autoApproveHosts: c.autoApproveHosts },
        chatAttachHome: this.o.home,
        mcpCache: this.cache,
        deferCachedStartMs: this.o.mcpDeferredStartMs ?? MCP_DEFERRED_START_MS,
        ...(this.o.mcpConnectTimeoutMs !== undefined ? { mcp: { connectTimeoutMs: this.o.mcpConnectTimeoutMs } } : {}),
      },
      { clock: this.o.clock },
    );
    const e: Entry = { key, globalKey: c.globalKey, hasMcp: Object.keys(mcpServers).length > 0, reg, startedAt: this.o.clock(), users: 0, retired: false };
    this.current.set(session, e);
    if (Object.keys(mcpServers).length > 0) {
      this.unwatch.set(
        e,
        reg.onMcpChange(() => {
          if (this.current.get(session) === e) this.notify(session, e);
        }),
      );
      this.notify(session, e);
    }
    return e;
  }

  private evictIdle(): void {
    const idle = [...this.current.values()].filter((x) => x.hasMcp && x.users === 0);
    const max = this.o.maxIdleMcpRegistries ?? MAX_IDLE_MCP_REGISTRIES;
    for (const x of idle.slice(0, Math.max(0, idle.length - max))) void this.retire(x);
  }

  private notify(session: string, e: Entry): void {
    const ws = this.watchers.get(session);
    if (ws === undefined || ws.size === 0) return;
    const servers = mcpInfo(e.reg);
    for (const w of [...ws]) {
      try {
        w(servers);
      } catch {
        // a watcher's failure is its own
      }
    }
  }

  /** Reports `session`'s MCP server states on every change; returns the unsubscribe function. */
  watch(session: string, listener: (servers: McpServerInfo[]) => void): () => void {
    let ws = this.watchers.get(session);
    if (ws === undefined) this.watchers.set(session, (ws = new Set()));
    ws.add(listener);
    const set = ws;
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.watchers.get(session) === set) this.watchers.delete(session);
    };
  }

  /** The MCP servers of `session`'s current registry (empty before its first turn or prewarm). */
  status(session: string): McpServerInfo[] {
    const e = this.current.get(session);
    return e === undefined ? [] : mcpInfo(e.reg);
  }

  /** The tools `session`'s current registry offers now (built-ins first, then the ready MCP servers'). */
  tools(session: string): SessionToolInfo[] {
    const e = this.current.get(session);
    if (e === undefined) return [];
    return e.reg.tools.map((t) => ({
      name: t.spec.name,
      risk: t.risk,
      ...(t.serverName !== undefined ? { server: t.serverName } : {}),
      description: (t.spec.description.split("\n")[0] ?? "").slice(0, 200),
    }));
  }

  /** Forgets `session`: its registry closes once no turn holds it. */
  closeSession(session: string): Promise<void> {
    const e = this.current.get(session);
    this.watchers.delete(session);
    if (e === undefined) return Promise.resolve();
    return this.retire(e);
  }

  private retire(e: Entry): Promise<void> {
    for (const [s, x] of this.current) if (x === e) this.current.delete(s);
    e.retired = true;
    this.unwatch.get(e)?.();
    this.unwatch.delete(e);
    return this.closeIfIdle(e);
  }

  private closeIfIdle(e: Entry): Promise<void> {
    if (!e.retired) return Promise.resolve();
    if (e.users > 0) {
      this.retired.add(e);
      return Promise.resolve();
    }
    this.retired.delete(e);
    const done = e.reg.close().catch(() => undefined);
    this.closing.add(done);
    void done.finally(() => this.closing.delete(done));
    return done;
  }

  /** Stops every MCP server. Call once no turn is running. */
  async close(): Promise<void> {
    const all = [...this.retired, ...this.current.values()];
    this.current.clear();
    this.retired.clear();
    this.watchers.clear();
    for (const f of this.unwatch.values()) f();
    this.unwatch.clear();
    await Promise.all([...all.map((e) => e.reg.close().catch(() => undefined)), ...this.closing]);
  }
}
