/**
 * The agent: everything a protocol adapter needs to run one turn on a durable session.
 *
 * `Agent.runTurn` contract (protocol-neutral; app-service, SCV and the host drive this same call):
 * 1. The user record is written and fsynced first (when a writer is given), before any provider request.
 * 2. Settings are reloaded (selection, reasoning; cache-only model metadata) and the provider/credential built.
 * 3. The system prompt is built (cwd, date, tools, skills, AGENTS.md / CLAUDE.md), the loop runs (turn-loop.ts) with
 *    the session's registry tools (built-ins incl. read_skill and web_fetch + MCP; none in `noTools` mode) plus
 *    `task` (subagents), with the selection, reasoning and fast mode captured here for every request of the turn.
 *    MCP (tool-registries.ts): one registry per session; its servers start in the session's cwd, in parallel, when
 *    the session is opened (`openSession`) or at its first turn. A starting server with a cached tool list is
 *    not waited for (its cached tools are offered; a call waits for it: tools/registry.ts). The first provider
 *    request of a tool-enabled turn waits for the other servers still starting until `mcpStartupWaitMs` after they
 *    were launched (never longer; cancellation ends the wait); a server ready later joins from the turn's next
 *    request. A failed server is reported (`openSession`'s listener, `mcpStatus`) and contributes no tools.
 *    Tool-free turns wait for nothing.
 *    The turn's sink is wrapped by `withLifecycle` (lifecycle.ts): tool / assistant writing / compaction lifecycles.
 * 4. The terminal record (status + accepted text) is written and fsynced. `runTurn` never rejects; the outcome's
 *    status is what was recorded (a persistence failure turns `completed` into `failed`).
 * Tool child processes get `cleanToolEnv` (no provider credentials or credential-like variables, no MC_/BERTH_
 * variables); built-in tools run under the tool policy of the global settings' `tools` section (tools/policy.ts),
 * which confines file tools to the workspace unless the settings say otherwise.
 */
import { homedir } from "node:os";
import type { EnvLike } from "../store/home.js";
import type { History, SessionWriter } from "../store/sessions/index.js";
import type { McpServerDef } from "../store/settings/schema.js";
import type { SettingsStore } from "../store/settings/settings-store.js";
import type { ApprovalPolicy } from "./approval.js";
import { FALLBACK_CONTEXT_WINDOW } from "./context.js";
import { mark } from "./debug-timing.js";
import type { FailureReason, TurnOutcome, TurnSink } from "./events.js";
import { urlForDisplay } from "../core/text-policy.js";
import { historyToMessages, type HistoryImage } from "./history.js";
import { gatedSink } from "./durable-gate.js";
import { withLifecycle } from "./lifecycle.js";
import { attachmentNote, MAX_IMAGES, reattachImages } from "./session/attachments.js";
import type { OpenedProvider, ProviderOptions } from "./providers/make.js";
import { afterFirstEvent } from "./after-first-event.js";
import { DEFAULT_RECORDER_TIMING, TurnRecorder, type RecorderTiming } from "./recorder.js";
import { buildSystemPrompt } from "./system-prompt.js";
import type { BashOptions } from "./tools/bash.js";
import { CHAT_ATTACH_TOOL_NAME } from "./tools/specs.js";
import { SessionRegistries, type McpServerInfo, type SessionToolInfo, type RegistryLease } from "./tool-registries.js";
import { SkillCatalog, type Skill } from "./tools/skills.js";
import type { ImagePart, ProviderRequest, Tool, ToolRisk, UserContent } from "./types.js";
import type { Workspace } from "./workspace.js";
import type { UserAttachment } from "../store/sessions/index.js";
import { storageCause } from "../store/sessions/errors.js";
import { TurnFailure, TurnResolver, type Resolved, type SelectionOverride } from "./turn-resolve.js";

export type { SelectionOverride };

export interface AgentOptions {
  /** Resolved MC_HOME. */
  home: string;
  /** Launch directory (project settings scope). MCP servers start in each session's own cwd. */
  cwd: string;
  env: EnvLike;
  /** The settings store to read (default: a new one for `home`, `cwd`, `env`); a host that already read them shares its own. */
  settings?: SettingsStore;
  providerOptions?: ProviderOptions;
  /** Provider requests per turn (default 50). */
  maxSteps?: number;
  /** Fraction of the context window that triggers compaction, at turn start and between steps (default 0.8). */
  compactAtRatio?: number;
  bash?: Omit<BashOptions, "env">;
  /**
   * How long after a session's MCP servers were launched its turns' first provider request waits for those still
   * starting (default `mcpStartupWaitOf(env)`: `BERTH_MCP_STARTUP_WAIT_MS`, else `MCP_STARTUP_WAIT_MS`); see the module
   * contract.
   */
  mcpStartupWaitMs?: number;
  /** See tool-registries.ts `MCP_DEFERRED_START_MS` (the default). */
  mcpDeferredStartMs?: number;
  /** Start + initialize + tools/list budget per MCP server (default 30 s). */
  mcpConnectTimeoutMs?: number;
  /** Sessions' MCP server sets kept running while no turn uses them (default 16, least recently used close first). */
  maxIdleMcpRegistries?: number;
  recorderTiming?: RecorderTiming;
  clock?: () => number;
  /**
   * Tools bound to one session (delegated agents such as `agent_berth`), added to the registry's for each turn of a
   * tool-enabled session. `depth` is the session's delegation depth. May load them first (a promise).
   */
  sessionTools?: (s: SessionToolContext) => Tool[] | Promise<Tool[]>;
}

/** What session-bound tools know of their session. */
export interface SessionToolContext {
  sessionId: string;
  depth: number;
  cwd: string;
  /**
   * The session's answer for work nobody attends (a background job's approval): the policy's `auto`, else the
   * client's `auto_approve` declaration, else deny.
   */
  unattended(name: string, risk: ToolRisk): "approve" | "deny";
  /**
   * The highest background job number (`job-N`) the session's stored history shows as started: jobs of an earlier
   * opening of the session (another connection or Berth process), which ended with it. Read from the history on call.
   */
  earlierJobs?: () => number;
}

/** The highest `job-N` an `agent_*` call's result in `history` names as started (0 when none). */
export function highestJobIn(history: History | null): number {
  let n = 0;
  for (const r of history?.records ?? []) {
    if (r.kind !== "tool_result" || !r.name.startsWith("agent_") || r.is_error) continue;
    const m = /^\{"job":"job-([1-9][0-9]{0,8})"/.exec(r.content);
    if (m !== null) n = Math.max(n, Number(m[1]));
  }
  return n;
}

export interface RunTurnRequest {
  turnId: string;
  /** The session's ID (binds session tools); absent for a turn of no session. */
  sessionId?: string;
  /** The session's client declared it approves everything (`auto_approve`). */
  autoApprove?: boolean;
  /** The session writer (lease holder), or null for an unpersisted turn. */
  writer: SessionWriter | null;
  /** Bounded durable history read at admission (null: a new session). */
  history: History | null;
  /** Session working directory (tools run here). */
  cwd: string;
  prompt: string;
  images?: ImagePart[];
  signal: AbortSignal;
  sink: TurnSink;
  approval?: ApprovalPolicy;
  noTools?: boolean;
  /** Per-session overrides of the settings' selection (a session opened with its own provider/model). */
  selection?: SelectionOverride;
  /** Per-session MCP servers (replacing the settings' `mcp_servers`). */
  mcpServers?: Record<string, McpServerDef>;
  /** A chat channel's name (`WeChat`, `Feishu`, …): adds the chat-channel section to the system prompt. */
  channel?: string;
  /** Depth of this session among delegated agents (0 for a direct client): at `MAX_DELEGATION_DEPTH` no `task`. */
  delegationDepth?: number;
  /** Steering messages injected at the next step boundary (see `LoopOptions.steer`). */
  steer?: () => string[];
  /** Where the tools touch files and run commands (unset: this machine). */
  workspace?: Workspace;
  /** Durable attachment descriptions kept on the user record (image paths, never bytes). */
  attachments?: UserAttachment[];
}

/** The provider and model a session's turns use (for a door's session-started reply). */
export interface SessionModelInfo {
  providerId: string;
  modelId: string;
  contextWindow: number;
  /** The model accepts image input. */
  images: boolean;
}

/** Sessions at this delegation depth (or deeper) get no `task` tool. */
export const MAX_DELEGATION_DEPTH = 2;

/** Default of `AgentOptions.mcpStartupWaitMs`. */
export const MCP_STARTUP_WAIT_MS = 5000;

/**
 * `AgentOptions.mcpStartupWaitMs` when the caller gives none: `BERTH_MCP_STARTUP_WAIT_MS` (whole milliseconds,
 * 0 … 600,000: for servers slower to start than the default allows, e.g. fetched by `npx` on first use), else
 * `MCP_STARTUP_WAIT_MS`. A value that is not such a number is ignored.
 */
export function mcpStartupWaitOf(env: EnvLike): number {
  const raw = env["BERTH_MCP_STARTUP_WAIT_MS"];
  return raw !== undefined && /^\d{1,6}$/.test(raw) && Number(raw) <= 600_000 ? Number(raw) : MCP_STARTUP_WAIT_MS;
}

/** What a door tells the agent about a session it opens (its tools are prepared ahead of the first turn). */
export interface SessionToolsSpec {
  sessionId: string;
  cwd: string;
  /** The session's own MCP servers (unset: the settings' `mcp_servers`). */
  mcpServers?: Record<string, McpServerDef>;
  noTools?: boolean;
}

/** A turn that cannot run, with the reason its outcome reports (thrown inside the agent, caught in `runTurn`). */
/** The turn loop (and with it tool execution, compaction, sub-agents), loaded once, on a first turn or `warm`. */
let turnLoop: Promise<typeof import("./turn-loop.js")> | null = null;
function loadTurnLoop(): Promise<typeof import("./turn-loop.js")> {
  if (turnLoop === null) {
    turnLoop = import("./turn-loop.js");
    turnLoop.catch(() => (turnLoop = null));
  }
  return turnLoop;
}

export class Agent {
  /** Settings → selection, provider and tool configuration, per turn (turn-resolve.ts). */
  private readonly resolver: TurnResolver;
  /** One tool registry per session (tool-registries.ts). */
  private readonly registries: SessionRegistries;
  private warmed: Promise<void> | null = null;
  /** Skill discovery, cached per process (skills.ts). */
  private readonly skills: SkillCatalog;
  /** Per session, which `openSession` is the latest (a close or a newer open makes an older one a no-op). */
  private readonly generations = new Map<string, number>();

  constructor(private readonly o: AgentOptions) {
    this.resolver = new TurnResolver(o);
    this.skills = new SkillCatalog({ mcHome: o.home, userHome: o.env["HOME"] ?? homedir() });
    this.registries = new SessionRegistries({
      home: o.home,
      env: o.env,
      ...(o.bash !== undefined ? { bash: o.bash } : {}),
      skills: this.skills,
      clock: o.clock ?? Date.now,
      ...(o.mcpConnectTimeoutMs !== undefined ? { mcpConnectTimeoutMs: o.mcpConnectTimeoutMs } : {}),
      ...(o.maxIdleMcpRegistries !== undefined ? { maxIdleMcpRegistries: o.maxIdleMcpRegistries } : {}),
      ...(o.mcpDeferredStartMs !== undefined ? { mcpDeferredStartMs: o.mcpDeferredStartMs } : {}),
    });
  }

  /**
   * Loads the turn path ahead of a first turn (the turn loop, the selected provider's driver; settings resolved once),
   * so a prompt finds it compiled. Doors call it once a session exists or the process is idle. Never rejects.
   */
  warm(): Promise<void> {
    return (this.warmed ??= Promise.all([loadTurnLoop(), this.resolver.resolve().catch(() => null)]).then(
      () => undefined,
      () => undefined,
    ));
  }

  /**
   * Prepares a session's tools ahead of its first turn: its MCP servers start now (in its cwd, in parallel).
   * `onMcp` receives every state change of its servers until `closeSession`. Never rejects.
   */
  async openSession(s: SessionToolsSpec, onMcp?: (servers: McpServerInfo[]) => void): Promise<void> {
    if (onMcp !== undefined) this.registries.watch(s.sessionId, onMcp);
    if (s.noTools === true) return;
    const gen = (this.generations.get(s.sessionId) ?? 0) + 1;
    this.generations.set(s.sessionId, gen);
    try {
      const layers = await this.resolver.settings.load();
      // Closed (or opened again) meanwhile: starting servers now would leak them.
      if (this.generations.get(s.sessionId) !== gen) return;
      this.registries.acquire(s.sessionId, s.cwd, TurnResolver.toolConfig(layers.global, s.mcpServers)).release();
    } catch {
      // unreadable settings: the first turn reports them
    }
  }

  /** Stops a session's MCP servers (once no turn holds them) and its status reports. */
  closeSession(sessionId: string): Promise<void> {
    this.generations.delete(sessionId);
    return this.registries.closeSession(sessionId);
  }

  /** The MCP servers of a session and their states (empty until its tools were prepared). */
  mcpStatus(sessionId: string): McpServerInfo[] {
    return this.registries.status(sessionId);
  }

  /** The tools a session's registry offers now. */
  toolList(sessionId: string): SessionToolInfo[] {
    return this.registries.tools(sessionId);
  }

  async runTurn(req: RunTurnRequest): Promise<TurnOutcome> {
    const recorder = req.writer === null ? null : new TurnRecorder(req.writer, req.turnId, this.o.recorderTiming ?? DEFAULT_RECORDER_TIMING);
    const fail = (reason: FailureReason, message?: string): TurnOutcome => ({
      status: "failed",
      assistantText: "",
      reason,
      ...(message !== undefined ? { message } : {}),
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 },
    });
    // The user record's write and fsync overlap the turn's preparation (settings, provider, tools, system prompt,
    // history) and the provider connection; every provider request is gated on it (`ProviderRequest.gate`: the
    // body's last byte waits), and nothing reaches the sink before it. A failed write aborts the preparation and the
    // turn fails `persistence` with no terminal record, as before: nothing durable was accepted.
    mark("turn.run");
    void loadTurnLoop().catch(() => undefined); // compiles while the turn prepares (a no-op once loaded)
    const ctl = new AbortController();
    const relay = (): void => ctl.abort();
    if (req.signal.aborted) ctl.abort();
    else req.signal.addEventListener("abort", relay, { once: true });
    const durable: Promise<void> =
      recorder === null
        ? Promise.resolve()
        : recorder.user(req.prompt, req.attachments).then(
            () => mark("turn.user_record_durable"),
            (e: unknown) => {
              ctl.abort();
              throw e;
            },
          );
    void durable.catch(() => undefined);
    const sink = recorder === null ? req.sink : gatedSink(req.sink, durable);
    let outcome: TurnOutcome;
    const used: { provider: OpenedProvider | null; baseUrl: string | null } = { provider: null, baseUrl: null };
    try {
      outcome = await this.execute({ ...req, signal: ctl.signal, sink }, recorder, recorder === null ? null : durable, used);
    } catch (e) {
      outcome = e instanceof TurnFailure ? fail(e.reason, e.detail) : fail("internal");
      if (req.signal.aborted) outcome = { ...outcome, status: "cancelled" };
    } finally {
      req.signal.removeEventListener("abort", relay);
    }
    try {
      await durable;
    } catch (e) {
      return fail("persistence", storageCause(e)); // nothing durable was accepted: no terminal record either
    }
    if (recorder !== null) {
      await recorder.settled();
      if (recorder.failure !== null && outcome.status === "completed") outcome = persistenceFailure(outcome, recorder.failure);
      try {
        await recorder.terminal(outcome.status, outcome.assistantText);
      } catch (e) {
        if (outcome.status === "completed") outcome = persistenceFailure(outcome, e);
      }
    }
    // A failure names the provider's URL as it may be shown (never its user name, password or query).
    if (outcome.status !== "completed" && outcome.status !== "cancelled" && used.baseUrl !== null) outcome = { ...outcome, providerUrl: urlForDisplay(used.baseUrl) };
    // The next turn's connection opens once this turn's end is written (provider-cache.ts), off its critical path.
    if (used.provider !== null) this.resolver.built.warmAfterTurn(used.provider);
    return outcome;
  }

  private async execute(
    req: RunTurnRequest,
    recorder: TurnRecorder | null,
    durable: Promise<void> | null,
    used: { provider: OpenedProvider | null; baseUrl: string | null },
  ): Promise<TurnOutcome> {
    // Skill discovery (stat-only when cached) runs alongside settings resolution; tool-free turns have none.
    const skills = req.noTools === true ? Promise.resolve([]) : this.skills.discover(req.cwd).catch((): Skill[] => []);
    const r = await this.resolver.resolve(req.selection, req.mcpServers);
    mark("turn.provider_resolved");
    used.provider = r.opened;
    used.baseUrl = r.baseUrl;
    if (durable !== null) {
      const inner = r.provider;
      const batches = inner.streamBatches?.bind(inner);
      r.provider = {
        id: inner.id,
        api: inner.api,
        stream: (pr) => inner.stream({ ...pr, gate: durable }),
        ...(batches !== undefined ? { streamBatches: (pr: ProviderRequest) => batches({ ...pr, gate: durable }) } : {}),
      };
    }
    // A turn of no session shares one registry (keyed by its configuration like any other).
    const lease = req.noTools === true ? null : this.registries.acquire(req.sessionId ?? "", req.cwd, r);
    try {
      return await this.run(req, recorder, r, lease, await skills);
    } finally {
      lease?.release();
    }
  }

  private async run(req: RunTurnRequest, recorder: TurnRecorder | null, r: Resolved, lease: RegistryLease | null, skills: Skill[]): Promise<TurnOutcome> {
    const registry = lease?.reg ?? null;
    // The first request waits for servers still starting, until the startup deadline (see the module contract).
    if (lease !== null) await lease.reg.waitForMcp(lease.startedAt + (this.o.mcpStartupWaitMs ?? mcpStartupWaitOf(this.o.env)), req.signal);
    const bound =
      registry !== null && req.sessionId !== undefined && this.o.sessionTools !== undefined
        ? await this.o.sessionTools({
            sessionId: req.sessionId,
            depth: req.delegationDepth ?? 0,
            cwd: req.cwd,
            unattended: (name, risk) => (req.approval === undefined || req.approval.policy(name, risk) === "auto" || req.autoApprove === true ? "approve" : "deny"),
            earlierJobs: () => highestJobIn(req.history),
          })
        : [];
    // `chat_attach` is offered only to chat-channel sessions (their bridge sends what it attaches).
    const offered = (): Tool[] => (registry?.tools ?? []).filter((t) => req.channel !== undefined || t.spec.name !== CHAT_ATTACH_TOOL_NAME);
    const tools = [...offered(), ...bound];
    if (req.signal.aborted) throw new TurnFailure("internal");
    const system = await buildSystemPrompt({
      cwd: req.cwd,
      now: new Date((this.o.clock ?? Date.now)()),
      ...(req.channel !== undefined ? { channel: req.channel } : {}),
      tools: [...tools.map((t) => t.spec), ...(req.noTools === true ? [] : [{ name: "task", description: "", inputSchema: {} }])],
      skills,
    });
    const earlier: HistoryImage[] = [];
    const messages = historyToMessages(req.history, earlier);
    if (r.images) await reattachImages(messages, earlier, MAX_IMAGES - (req.images?.length ?? 0));
    const content: UserContent[] = [{ type: "text", text: req.prompt + attachmentNote(req.attachments ?? [], req.noTools !== true) }];
    for (const img of req.images ?? []) {
      content.push(r.images ? img : { type: "text", text: "[an attached image was omitted: this model does not accept images]" });
    }
    messages.push({ role: "user", content });
    const subagents = req.noTools !== true && (req.delegationDepth ?? 0) < MAX_DELEGATION_DEPTH;
    let n = 0;
    // Generic lifecycle activity (tool / assistant writing / compaction) for every door; see lifecycle.ts.
    mark("turn.request_prepared");
    const sink = withLifecycle(req.sink);
    const { runLoop } = await loadTurnLoop();
    const outcome = await runLoop({
      turnId: req.turnId,
      // Servers whose start was deferred (cached tool lists, tool-registries.ts) start once the provider answered.
      provider: registry?.mcpStarting === true ? afterFirstEvent(r.provider, () => registry.startMcp()) : r.provider,
      model: r.selection.model_id,
      system,
      messages,
      tools,
      subagents,
      ...(req.steer !== undefined ? { steer: req.steer } : {}),
      ...(req.workspace !== undefined ? { workspace: req.workspace } : {}),
      ...(registry?.mcpStarting === true ? { moreTools: offered } : {}),
      cwd: req.cwd,
      signal: req.signal,
      sink,
      recorder,
      ...(req.approval !== undefined ? { approval: req.approval } : {}),
      maxSteps: this.o.maxSteps ?? 50,
      ...(r.selection.max_output_tokens !== null ? { maxOutputTokens: r.selection.max_output_tokens } : {}),
      thinking: r.selection.thinking_level,
      fast: r.selection.fast,
      contextWindow: r.selection.context_window ?? FALLBACK_CONTEXT_WINDOW,
      compactAtRatio: this.o.compactAtRatio ?? 0.8,
      newId: () => `${req.turnId}/${++n}`,
    });
    sink.end(outcome.status);
    return outcome;
  }

  /**
   * What a turn with this selection would use, without running one: provider, model and context window (the
   * fallback window for a model without catalog metadata). Null when nothing usable is selected.
   */
  async describe(selection?: SelectionOverride): Promise<SessionModelInfo | null> {
    try {
      const r = await this.resolver.resolve(selection, undefined, true);
      return { providerId: r.selection.provider_id, modelId: r.selection.model_id, contextWindow: r.selection.context_window ?? FALLBACK_CONTEXT_WINDOW, images: r.images };
    } catch {
      return null;
    }
  }

  /** Stops MCP servers. Call once no turn is running. */
  close(): Promise<void> {
    return this.registries.close();
  }
}

/** A completed outcome turned failed by a session write that failed, with the write's storage cause when it has one. */
function persistenceFailure(o: TurnOutcome, e: unknown): TurnOutcome {
  const { message: _earlier, ...rest } = o;
  const cause = storageCause(e);
  return { ...rest, status: "failed", reason: "persistence", ...(cause !== undefined ? { message: cause } : {}) };
}
