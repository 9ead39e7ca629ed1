/**
 * The tool registry a session's turn loop uses: built-in tools plus MCP tools from the
 * configured servers. `noTools` yields an empty registry (no servers started). Creating a
 * registry never rejects because of a failing MCP server (see `mcpServers` for their state).
 * - `openToolRegistry` returns at once: the MCP servers start in the background, in parallel (`starting`), and
 *   `tools` grows as each becomes ready; `waitForMcp` waits for them up to a deadline; `onMcpChange` reports
 *   each state change (ready, failed, a later crash).
 * - `createToolRegistry` is the same, resolved once every server is ready or failed.
 */
import type { McpServerDef } from "../../store/settings/schema.js";
import type { Tool, ToolSpec } from "../types.js";
import { createBashTool, type BashOptions } from "./bash.js";
import { editTool } from "./edit.js";
import { globTool } from "./glob.js";
import { grepTool } from "./grep.js";
import type { ToolPolicy } from "./confine.js";
import { lsTool } from "./ls.js";
import { todoWriteTool } from "./todo-write.js";
import type { McpOptions, McpServers, McpServerStatus } from "./mcp.js";
import { withPolicy } from "./policy.js";
import { readTool } from "./read.js";
import { createReadSkillTool } from "./read-skill.js";
import { createChatAttachTool } from "./chat-attach.js";
import type { SkillCatalog } from "./skills.js";
import { createWebFetchTool, type WebFetchOptions } from "./web-fetch.js";
import { writeTool } from "./write.js";

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
  /** Resolves once no server is starting, or at `deadline` (a `clock` time, ms), or when `signal` aborts. */
  waitForMcp(deadline: number, signal?: AbortSignal): Promise<void>;
  /** Calls `listener` after every MCP server state change; returns the unsubscribe function. */
  onMcpChange(listener: () => void): () => void;
  /** Stops every MCP server. Idempotent. */
  close(): Promise<void>;
}

export const BUILTIN_TOOL_NAMES = ["read", "write", "edit", "bash", "grep", "glob", "ls", "todo_write"] as const;

export function builtinTools(bash?: BashOptions, policy?: ToolPolicy): Tool[] {
  const tools = [readTool, writeTool, editTool, bash === undefined ? createBashTool() : createBashTool(bash), grepTool, globTool, lsTool, todoWriteTool];
  return policy === undefined ? tools : tools.map((t) => withPolicy(t, policy));
}

/** Options of `openToolRegistry` beyond the registry's own. */
export interface OpenRegistryOptions {
  /** Time source of `waitForMcp` deadlines (default `Date.now`). */
  clock?: () => number;
}

export function openToolRegistry(opts: ToolRegistryOptions, o: OpenRegistryOptions = {}): ToolRegistry {
  if (opts.noTools === true) return new Registry([], {}, opts, o);
  const local = builtinTools(opts.bash, opts.policy);
  if (opts.skills !== undefined) local.push(createReadSkillTool(opts.skills));
  if (opts.webFetch !== undefined) local.push(createWebFetchTool(opts.webFetch));
  if (opts.chatAttachHome !== undefined) {
    const t = createChatAttachTool(opts.chatAttachHome);
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
  private readonly pending: McpServerStatus[];
  private readonly listeners = new Set<() => void>();
  private readonly loaded: Promise<void> = Promise.resolve();
  private readonly settled: Promise<void>;
  private closing: Promise<void> | null = null;
  private cache: { mcp: Tool[]; all: Tool[]; byName: Map<string, Tool> } | null = null;
  private readonly clock: () => number;

  constructor(
    private readonly local: Tool[],
    defs: Record<string, McpServerDef>,
    opts: ToolRegistryOptions,
    o: OpenRegistryOptions,
  ) {
    this.clock = o.clock ?? Date.now;
    const names = Object.keys(defs).sort();
    this.pending = names.map(placeholder);
    if (names.length === 0) {
      this.settled = Promise.resolve();
      return;
    }
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
    this.settled = this.loaded.then(() => this.mcp?.settled);
  }

  private changed(): void {
    for (const l of [...this.listeners]) {
      try {
        l();
      } catch {
        // a listener's failure is its own
      }
    }
  }

  private view(): { all: Tool[]; byName: Map<string, Tool> } {
    const mcp = this.mcp?.tools() ?? [];
    if (this.cache?.mcp !== mcp) {
      const byName = new Map<string, Tool>();
      for (const t of [...this.local, ...mcp]) if (!byName.has(t.spec.name)) byName.set(t.spec.name, t);
      this.cache = { mcp, all: [...byName.values()], byName };
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

  async waitForMcp(deadline: number, signal?: AbortSignal): Promise<void> {
    if (!this.mcpStarting || signal?.aborted === true) return;
    const left = deadline - this.clock();
    if (left <= 0) return;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await Promise.race([
        this.settled,
        ...(Number.isFinite(left) ? [new Promise<void>((r) => (timer = setTimeout(r, left)))] : []),
        ...(signal !== undefined ? [new Promise<void>((r) => signal.addEventListener("abort", (onAbort = () => r()), { once: true }))] : []),
      ]);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
    }
  }

  onMcpChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.loaded;
      await this.mcp?.close();
      for (const p of this.pending) if (p.state === "starting") p.state = "closed";
      this.listeners.clear();
    })();
    return this.closing;
  }
}
