/**
 * The tool registry a session's turn loop uses: built-in tools plus MCP tools from the
 * configured servers. `noTools` yields an empty registry (no servers started). Creating a
 * registry never rejects because of a failing MCP server (see `mcpServers` for their state).
 * - `openToolRegistry` returns at once: the MCP servers start in the background, in parallel (`starting`), and
 *   `tools` grows as each becomes ready; `waitForMcp` waits for them up to a deadline; `onMcpChange` reports
 *   each state change (ready, failed, a later crash).
 * - With `mcpCache`: a server starting with a cached tool list (its last start with the same definition and cwd)
 *   offers those tools at once; a call to one waits for the server (the call's signal, or the server's connect
 *   budget, ends the wait) and runs on the live tool of that name, or ends `unavailable` when the server failed or
 *   no longer lists it. Once the server is ready its live list replaces the cached one (and is cached). Such a
 *   server does not hold `waitForMcp`. A server without a cached list offers nothing until it is ready.
 * - With `deferCachedStartMs` and a cached list for EVERY configured server, nothing is loaded or spawned at open
 *   (the servers show `starting`): they start on `startMcp()` (the agent calls it once a turn's provider answered,
 *   so they do not compete with the first request for CPU), on a call to one of their tools, or
 *   `deferCachedStartMs` after open, whichever comes first. Without a cached list for each, they start at once.
 * - `createToolRegistry` is the same, resolved once every server is ready or failed.
 */
import type { McpServerDef } from "../../store/settings/schema.js";
import type { Tool, ToolSpec } from "../types.js";
import type { BashOptions } from "./bash.js";
import type { ToolPolicy } from "./confine.js";
import { lazyTool } from "./lazy.js";
import { bashDef, CHAT_ATTACH_DEF, EDIT_DEF, GLOB_DEF, GREP_DEF, LS_DEF, READ_DEF, READ_SKILL_DEF, WEB_FETCH_DEF, webFetchAutoApprove, WRITE_DEF } from "./specs.js";
import { todoWriteTool } from "./todo-write.js";
import type { ListedTool, McpOptions, McpServers, McpServerStatus } from "./mcp.js";
import type { McpToolCache } from "./mcp-cache.js";
import { mcpToolName, mergeTools } from "./mcp-names.js";
import { validateJsonSchema } from "./json-schema.js";
import { fail } from "./result.js";
import { withPolicy } from "./policy.js";
import type { SkillCatalog } from "./skills.js";
import type { WebFetchOptions } from "./web-fetch.js";

export interface ToolRegistryOptions {
  /** Working directory MCP servers start in (built-in tools use `ToolContext.cwd` per call). */
  cwd: string;
  mcpServers?: Record<string, McpServerDef>;
  noTools?: boolean;
  bash?: BashOptions;
  mcp?: Omit<McpOptions, "cwd">;
  /** Policy of the built-in tools (file confinement, bash sandbox). Default: `DEFAULT_TOOL_POLICY` (confined). */
  policy?: ToolPolicy;
  /** Adds `read_skill` over this catalog. */
  skills?: SkillCatalog;
  /** Adds `web_fetch` with these options. */
  webFetch?: WebFetchOptions;
  /** Adds `chat_attach`, copying into this home's media outbox (offered by the turn loop only to channel sessions). */
  chatAttachHome?: string;
  /** Tool lists of earlier starts: a starting server's cached tools are offered at once (see the module contract). */
  mcpCache?: McpToolCache;
  /** Start servers that all have cached lists only on `startMcp`, a tool call, or this long after open (ms). */
  deferCachedStartMs?: number;
}

export interface ToolRegistry {
  /**
   * Built-ins first (read, write, edit, bash, grep, glob, ls, todo_write, then read_skill, web_fetch and
   * chat_attach when configured), then the tools of the MCP servers ready now, by server name.
   */
  readonly tools: readonly Tool[];
  get(name: string): Tool | undefined;
  specs(): ToolSpec[];
  /** Every configured server with its state (`starting` until it is ready or failed). */
  readonly mcpServers: readonly McpServerStatus[];
  /** True while a configured server is still starting. */
  readonly mcpStarting: boolean;
  /**
   * Resolves once no server is starting without a cached tool list, or at `deadline` (a `clock` time, ms), or when
   * `signal` aborts.
   */
  waitForMcp(deadline: number, signal?: AbortSignal): Promise<void>;
  /** Calls `listener` after every MCP server state change; returns the unsubscribe function. */
  onMcpChange(listener: () => void): () => void;
  /** Starts servers whose start was deferred (see the module contract); no-op otherwise. Idempotent. */
  startMcp(): void;
  /** Stops every MCP server. Idempotent. */
  close(): Promise<void>;
}

export const BUILTIN_TOOL_NAMES = ["read", "write", "edit", "bash", "grep", "glob", "ls", "todo_write"] as const;

/**
 * The built-in tools. Each one's code (and the node built-ins it needs) loads on its first call (lazy.ts): listing
 * them and sending their schemas to a model loads only their definitions (specs.ts).
 */
export function builtinTools(bash?: BashOptions, policy?: ToolPolicy): Tool[] {
  const tools = [
    lazyTool(READ_DEF, async () => (await import("./read.js")).readTool),
    lazyTool(WRITE_DEF, async () => (await import("./write.js")).writeTool),
    lazyTool(EDIT_DEF, async () => (await import("./edit.js")).editTool),
    lazyTool(bashDef(bash?.defaultTimeoutMs, bash?.maxTimeoutMs), async () => (await import("./bash.js")).createBashTool(bash)),
    lazyTool(GREP_DEF, async () => (await import("./grep.js")).grepTool),
    lazyTool(GLOB_DEF, async () => (await import("./glob.js")).globTool),
    lazyTool(LS_DEF, async () => (await import("./ls.js")).lsTool),
    todoWriteTool,
  ];
  return policy === undefined ? tools : tools.map((t) => withPolicy(t, policy));
}

/** `web_fetch` with these options; its code loads on its first call, its approval exemption is answered at once. */
function lazyWebFetch(o: WebFetchOptions): Tool {
  const hosts = new Set((o.autoApproveHosts ?? []).map((h) => h.toLowerCase()));
  return lazyTool(WEB_FETCH_DEF, async () => (await import("./web-fetch.js")).createWebFetchTool(o), (args) => webFetchAutoApprove(hosts, args["url"]));
}

/** Options of `openToolRegistry` beyond the registry's own. */
export interface OpenRegistryOptions {
  /** Time source of `waitForMcp` deadlines (default `Date.now`). */
  clock?: () => number;
}

export function openToolRegistry(opts: ToolRegistryOptions, o: OpenRegistryOptions = {}): ToolRegistry {
  if (opts.noTools === true) return new Registry([], {}, opts, o);
  const local = builtinTools(opts.bash, opts.policy);
  const skills = opts.skills;
  if (skills !== undefined) local.push(lazyTool(READ_SKILL_DEF, async () => (await import("./read-skill.js")).createReadSkillTool(skills)));
  if (opts.webFetch !== undefined) local.push(lazyWebFetch(opts.webFetch));
  const chatHome = opts.chatAttachHome;
  if (chatHome !== undefined) {
    const t = lazyTool(CHAT_ATTACH_DEF, async () => (await import("./chat-attach.js")).createChatAttachTool(chatHome));
    local.push(opts.policy === undefined ? t : withPolicy(t, opts.policy));
  }
  return new Registry(local, opts.mcpServers ?? {}, opts, o);
}

export async function createToolRegistry(opts: ToolRegistryOptions): Promise<ToolRegistry> {
  const reg = openToolRegistry(opts);
  await reg.waitForMcp(Infinity);
  return reg;
}

/** A configured server before the MCP module is loaded. */
function placeholder(name: string): McpServerStatus {
  return { name, state: "starting", toolCount: 0, pid: null, stderrTail: () => "" };
}

class Registry implements ToolRegistry {
  private mcp: McpServers | null = null;
  private readonly names: string[];
  private readonly pending: McpServerStatus[];
  private readonly listeners = new Set<() => void>();
  /** Called at every state change (waits of `waitForMcp` and of cached tools' calls). */
  private readonly wakers = new Set<() => void>();
  private loaded: Promise<void> = Promise.resolve();
  /** Set while the start is deferred (see the module contract): starts the servers. */
  private deferred: (() => void) | null = null;
  private deferTimer: NodeJS.Timeout | undefined;
  private closing: Promise<void> | null = null;
  private version = 0;
  private cache: { version: number; all: Tool[]; byName: Map<string, Tool> } | null = null;
  /** Per server with a cached list: stand-ins for its tools while it starts. */
  private readonly standIns = new Map<string, Tool[]>();
  private readonly cachedWritten = new Set<string>();
  private readonly clock: () => number;

  constructor(
    private readonly local: Tool[],
    private readonly defs: Record<string, McpServerDef>,
    private readonly opts: ToolRegistryOptions,
    o: OpenRegistryOptions,
  ) {
    this.clock = o.clock ?? Date.now;
    this.names = Object.keys(defs).sort();
    this.pending = this.names.map(placeholder);
    if (this.names.length === 0) return;
    for (const name of this.names) {
      const listed = opts.mcpCache?.read(defs[name] as McpServerDef, opts.cwd);
      if (listed !== null && listed !== undefined) this.standIns.set(name, this.standInTools(name, listed));
    }
    const start = (): void => {
      this.deferred = null;
      if (this.deferTimer !== undefined) clearTimeout(this.deferTimer);
      if (this.closing === null) this.load(defs, opts);
    };
    if (opts.deferCachedStartMs !== undefined && this.standIns.size === this.names.length) {
      this.deferred = start;
      this.deferTimer = setTimeout(start, opts.deferCachedStartMs);
      this.deferTimer.unref();
      return;
    }
    start();
  }

  private load(defs: Record<string, McpServerDef>, opts: ToolRegistryOptions): void {
    // The MCP SDK costs ~80 ms to load: only sessions with configured servers pay for it, in the background.
    this.loaded = import("./mcp.js").then(
      ({ startMcpServers }) => {
        if (this.closing !== null) return;
        this.mcp = startMcpServers(defs, { ...opts.mcp, cwd: opts.cwd }, () => this.changed());
      },
      () => {
        for (const p of this.pending) Object.assign(p, { state: "failed", error: "the MCP client could not be loaded" });
        this.changed();
      },
    );
  }

  private stateOf(name: string): McpServerStatus["state"] {
    return this.mcpServers.find((x) => x.name === name)?.state ?? "closed";
  }

  /** Tools named like the live ones will be (per server, in list order), each running on the live tool once ready. */
  private standInTools(server: string, listed: readonly ListedTool[]): Tool[] {
    const taken = new Set<string>();
    return listed.map((t) => {
      const modelName = mcpToolName(server, t.name, taken);
      const inputSchema: Record<string, unknown> = { ...t.inputSchema, type: "object" };
      return {
        spec: { name: modelName, description: (t.description ?? `Tool ${t.name} from MCP server ${server}.`).slice(0, 2048), inputSchema },
        transport: "mcp",
        risk: "network",
        serverName: server,
        validate: (args) => {
          if (typeof args !== "object" || args === null || Array.isArray(args)) return { ok: false, message: "(arguments): expected object" };
          const errors = validateJsonSchema(inputSchema, args);
          return errors.length === 0 ? { ok: true, value: args as Record<string, unknown> } : { ok: false, message: errors.join("\n") };
        },
        run: async (args, ctx) => {
          this.startMcp();
          await this.until(() => this.stateOf(server) !== "starting", ctx.signal);
          if (ctx.signal.aborted) return fail("cancelled", `${modelName}: cancelled before start`);
          const live = this.mcp?.listed(server)?.tools.find((x) => x.spec.name === modelName);
          if (live === undefined)
            return fail("unavailable", this.stateOf(server) === "ready" ? `${modelName}: MCP server ${server} no longer offers this tool` : `${modelName}: MCP server ${server} is not available`);
          return live.run(args, ctx);
        },
      };
    });
  }

  /** Resolves when `ok()` holds (checked at every state change), or `signal` aborts. */
  private async until(ok: () => boolean, signal?: AbortSignal, deadline = Infinity): Promise<void> {
    while (!ok() && signal?.aborted !== true) {
      const left = deadline - this.clock();
      if (left <= 0) return;
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      let wake: (() => void) | undefined;
      try {
        await new Promise<void>((r) => {
          wake = () => r();
          this.wakers.add(wake);
          if (Number.isFinite(left)) timer = setTimeout(r, left);
          if (signal !== undefined) signal.addEventListener("abort", (onAbort = () => r()), { once: true });
        });
      } finally {
        if (wake !== undefined) this.wakers.delete(wake);
        if (timer !== undefined) clearTimeout(timer);
        if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      }
    }
  }

  private changed(): void {
    this.version++;
    for (const name of this.names) {
      const l = this.mcp?.listed(name);
      if (l === null || l === undefined || this.cachedWritten.has(name)) continue;
      this.cachedWritten.add(name);
      this.opts.mcpCache?.write(this.defs[name] as McpServerDef, this.opts.cwd, l.raw);
    }
    for (const w of [...this.wakers]) w();
    for (const l of [...this.listeners]) {
      try {
        l();
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private view(): { all: Tool[]; byName: Map<string, Tool> } {
    if (this.cache?.version !== this.version) {
      const lists = this.names.map((name) => {
        const live = this.mcp?.listed(name);
        if (live !== null && live !== undefined) return live.tools;
        return this.stateOf(name) === "starting" ? (this.standIns.get(name) ?? []) : [];
      });
      const byName = new Map<string, Tool>();
      for (const t of [...this.local, ...mergeTools(lists)]) if (!byName.has(t.spec.name)) byName.set(t.spec.name, t);
      this.cache = { version: this.version, all: [...byName.values()], byName };
    }
    return this.cache;
  }

  get tools(): readonly Tool[] {
    return this.view().all;
  }

  get(name: string): Tool | undefined {
    return this.view().byName.get(name);
  }

  specs(): ToolSpec[] {
    return this.view().all.map((t) => ({ name: t.spec.name, description: t.spec.description, inputSchema: t.spec.inputSchema }));
  }

  get mcpServers(): readonly McpServerStatus[] {
    return this.mcp?.servers ?? this.pending;
  }

  get mcpStarting(): boolean {
    return this.mcpServers.some((s) => s.state === "starting");
  }

  waitForMcp(deadline: number, signal?: AbortSignal): Promise<void> {
    return this.until(() => !this.mcpServers.some((s) => s.state === "starting" && !this.standIns.has(s.name)), signal, deadline);
  }

  startMcp(): void {
    this.deferred?.();
  }

  onMcpChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): Promise<void> {
    if (this.deferTimer !== undefined) clearTimeout(this.deferTimer);
    this.deferred = null;
    this.closing ??= (async () => {
      await this.loaded;
      await this.mcp?.close();
      for (const p of this.pending) if (p.state === "starting") p.state = "closed";
      this.version++;
      for (const w of [...this.wakers]) w();
      this.listeners.clear();
    })();
    return this.closing;
  }
}
