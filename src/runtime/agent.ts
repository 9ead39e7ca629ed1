/**
 * The agent: everything a protocol adapter needs to run one turn on a durable session.
 *
 * `Agent.runTurn` contract (protocol-neutral; app-service, SCV and the host drive this same call):
 * 1. The user record is written and fsynced first (when a writer is given), before any provider request.
 * 2. Settings are reloaded (selection, reasoning; cache-only model metadata) and the provider/credential built.
 * 3. The system prompt is built (cwd, date, tools, skills, AGENTS.md / CLAUDE.md), the loop runs (turn-loop.ts) with
 *    the registry's tools (built-ins incl. read_skill and web_fetch + MCP; none in `noTools` mode) plus `task`
 *    (subagents), with the selection, reasoning and fast mode captured here for every request of the turn.
 *    The turn's sink is wrapped by `withLifecycle` (lifecycle.ts): tool / assistant writing / compaction lifecycles.
 * 4. The terminal record (status + accepted text) is written and fsynced. `runTurn` never rejects; the outcome's
 *    status is what was recorded (a persistence failure turns `completed` into `failed`).
 * Tool child processes get `cleanToolEnv` (no provider credentials or credential-like variables, no MC_/BERTH_
 * variables); built-in tools run under the tool policy of the global settings' `tools` section (tools/policy.ts),
 * which confines file tools to the workspace unless the door's `toolPolicy` or the settings say otherwise.
 */
import { homedir } from "node:os";
import { AuthStore } from "../store/auth/auth-store.js";
import { CatalogCache } from "../store/catalog/cache.js";
import { builtinBaseUrl, findProvider } from "../store/catalog/providers.js";
import type { EnvLike } from "../store/home.js";
import type { History, SessionWriter } from "../store/sessions/index.js";
import { ConfigService, type RuntimeSelection } from "../store/settings/config.js";
import type { McpServerDef, ToolSettings } from "../store/settings/schema.js";
import { SettingsStore } from "../store/settings/settings-store.js";
import { anthropicCredentialSource, codexCredentialSource, CodexTokenRefresher, customCredentialSource } from "./auth/credentials.js";
import { codexOAuthConfigFromEnv } from "./auth/codex-oauth.js";
import type { ApprovalPolicy } from "./approval.js";
import { FALLBACK_CONTEXT_WINDOW } from "./context.js";
import { cleanToolEnv } from "./env.js";
import type { FailureReason, TurnOutcome, TurnSink } from "./events.js";
import { historyToMessages, type HistoryImage } from "./history.js";
import { withLifecycle } from "./lifecycle.js";
import { attachmentNote, MAX_IMAGES, reattachImages } from "./session/attachments.js";
import { createProvider, type ProviderOptions } from "./providers/index.js";
import { DEFAULT_RECORDER_TIMING, TurnRecorder, type RecorderTiming } from "./recorder.js";
import { buildSystemPrompt } from "./system-prompt.js";
import { CHAT_ATTACH_TOOL_NAME } from "./tools/chat-attach.js";
import { createToolRegistry, toolPolicyFromSettings, type BashOptions, type ToolPolicy, type ToolRegistry } from "./tools/index.js";
import { SkillCatalog, type Skill } from "./tools/skills.js";
import { runLoop } from "./turn-loop.js";
import type { ImagePart, Provider, ThinkingLevel, Tool, ToolRisk, UserContent } from "./types.js";
import type { Workspace } from "./workspace.js";
import type { UserAttachment } from "../store/sessions/index.js";

export interface AgentOptions {
  /** Resolved MC_HOME. */
  home: string;
  /** Launch directory (project settings scope; MCP servers start here). */
  cwd: string;
  env: EnvLike;
  providerOptions?: ProviderOptions;
  /** Provider requests per turn (default 50). */
  maxSteps?: number;
  /** Fraction of the context window that triggers compaction, at turn start and between steps (default 0.8). */
  compactAtRatio?: number;
  bash?: Omit<BashOptions, "env">;
  /** The door's choice of tool policy over the settings' (doors without approvals pass none: the safe default). */
  toolPolicy?: Partial<ToolPolicy>;
  recorderTiming?: RecorderTiming;
  clock?: () => number;
  /**
   * Tools bound to one session (delegated agents such as `agent_berth`), added to the registry's for each turn of a
   * tool-enabled session. `depth` is the session's delegation depth.
   */
  sessionTools?: (s: SessionToolContext) => Tool[];
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

/** A session's own provider/model/base URL/reasoning; unset fields follow the settings. */
export interface SelectionOverride {
  provider?: string;
  model?: string;
  baseUrl?: string;
  reasoning?: ThinkingLevel;
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

interface RegistryEntry {
  key: string;
  reg: Promise<ToolRegistry>;
  /** Turns holding it. */
  users: number;
  /** Replaced by a newer configuration: closes once `users` is 0. */
  retired: boolean;
}

interface Resolved {
  provider: Provider;
  selection: RuntimeSelection & { model_id: string };
  images: boolean;
  mcp: Record<string, McpServerDef>;
  keyEnvs: string[];
  toolSettings: ToolSettings | undefined;
  /** Global `web_fetch.auto_approve_hosts`. */
  autoApproveHosts: string[];
}

/** A turn that cannot run, with the reason its outcome reports (thrown inside the agent, caught in `runTurn`). */
class TurnFailure extends Error {
  constructor(readonly reason: FailureReason) {
    super(`turn failed: ${reason}`);
    this.name = "TurnFailure";
  }
}

export class Agent {
  private readonly settings: SettingsStore;
  private readonly config: ConfigService;
  private readonly auth: AuthStore;
  private codex: CodexTokenRefresher | null = null;
  private registry: RegistryEntry | null = null;
  /** Replaced registries still held by a running turn. */
  private readonly retired = new Set<RegistryEntry>();
  /** Registry closes in progress (awaited by `close`). */
  private readonly closing = new Set<Promise<void>>();
  /** Skill discovery, cached per process (skills.ts). */
  private readonly skills: SkillCatalog;

  constructor(private readonly o: AgentOptions) {
    this.settings = new SettingsStore({ home: o.home, projectDir: o.cwd, env: o.env });
    this.config = new ConfigService({ settings: this.settings, cache: new CatalogCache({ home: o.home }), env: o.env });
    this.auth = new AuthStore(o.home);
    this.skills = new SkillCatalog({ mcHome: o.home, userHome: o.env["HOME"] ?? homedir() });
  }

  /** Reloads settings and builds this turn's provider. Throws a `TurnFailure`. */
  private async resolve(over: SelectionOverride = {}, mcpOverride?: Record<string, McpServerDef>): Promise<Resolved> {
    let sel: RuntimeSelection;
    let layers;
    try {
      [sel, layers] = await Promise.all([this.config.runtimeSelection(), this.settings.load()]);
    } catch {
      throw new TurnFailure("selection");
    }
    if ((over.provider !== undefined && over.provider !== sel.provider_id) || (over.model !== undefined && over.model !== sel.model_id)) {
      // Another model than the settings': its catalog metadata is not looked up (the fallback window applies).
      sel = { ...sel, provider_id: over.provider ?? sel.provider_id, model_id: over.model ?? sel.model_id, context_window: null, max_output_tokens: null };
    }
    if (over.reasoning !== undefined) sel = { ...sel, thinking_level: over.reasoning };
    if (sel.model_id === null) throw new TurnFailure("selection");
    const env = this.o.env;
    const keyEnvs = Object.values(layers.global.providers ?? {}).flatMap((p) => (p.api_key_env !== undefined ? [p.api_key_env] : []));
    const mcp = mcpOverride ?? layers.global.mcp_servers ?? {};
    const entry = findProvider(layers.global, sel.provider_id);
    if (entry === undefined) throw new TurnFailure("selection");
    const opts: ProviderOptions = { env, ...this.o.providerOptions };
    let provider: Provider;
    let images = true;
    try {
      if (!entry.builtin) {
        provider = createProvider(entry.id, { api: entry.def.api, baseUrl: over.baseUrl ?? entry.def.base_url }, customCredentialSource(entry.def, env), opts);
        images = entry.def.models.find((m) => m.id === sel.model_id)?.images === true;
      } else if (entry.id === "anthropic") {
        provider = createProvider("anthropic", { api: "anthropic", baseUrl: over.baseUrl ?? builtinBaseUrl("anthropic", env) }, anthropicCredentialSource(env, this.auth), opts);
      } else {
        this.codex ??= new CodexTokenRefresher({ store: this.auth, oauth: codexOAuthConfigFromEnv(env) });
        provider = createProvider(
          "openai-codex",
          { api: "openai-responses", baseUrl: over.baseUrl ?? builtinBaseUrl("openai-codex", env) },
          codexCredentialSource(this.codex),
          opts,
        );
      }
    } catch {
      throw new TurnFailure("selection");
    }
    const autoApproveHosts = layers.global.web_fetch?.auto_approve_hosts ?? [];
    return { provider, selection: { ...sel, model_id: sel.model_id }, images, mcp, keyEnvs, toolSettings: layers.global.tools, autoApproveHosts };
  }

  /**
   * Takes the tool registry for the current MCP configuration for one turn (rebuilt when the configuration changes).
   * A replaced registry closes (its MCP servers stop) as soon as no turn holds it. Pair with `releaseTools`.
   */
  private acquireTools(r: Resolved): RegistryEntry {
    const key = JSON.stringify({ mcp: r.mcp, keys: r.keyEnvs, tools: r.toolSettings ?? null, hosts: r.autoApproveHosts });
    if (this.registry?.key !== key) {
      if (this.registry !== null) {
        this.registry.retired = true;
        this.closeIfIdle(this.registry);
      }
      const env = cleanToolEnv(this.o.env, r.keyEnvs, r.toolSettings?.secret_env_patterns);
      const mcpServers = Object.fromEntries(Object.entries(r.mcp).map(([k, d]) => [k, { ...d, env: { ...d.env } }]));
      const policy = toolPolicyFromSettings(r.toolSettings, this.o.home, this.o.toolPolicy);
      const reg = createToolRegistry({
        cwd: this.o.cwd,
        mcpServers,
        bash: { ...this.o.bash, env },
        policy,
        skills: this.skills,
        webFetch: { autoApproveHosts: r.autoApproveHosts },
        chatAttachHome: this.o.home,
      });
      this.registry = { key, reg, users: 0, retired: false };
    }
    this.registry.users++;
    return this.registry;
  }

  private releaseTools(e: RegistryEntry): void {
    e.users--;
    this.closeIfIdle(e);
  }

  private closeIfIdle(e: RegistryEntry): void {
    if (!e.retired) return;
    if (e.users > 0) {
      this.retired.add(e);
      return;
    }
    this.retired.delete(e);
    const done = e.reg.then((reg) => reg.close()).catch(() => undefined);
    this.closing.add(done);
    void done.finally(() => this.closing.delete(done));
  }

  async runTurn(req: RunTurnRequest): Promise<TurnOutcome> {
    const recorder = req.writer === null ? null : new TurnRecorder(req.writer, req.turnId, this.o.recorderTiming ?? DEFAULT_RECORDER_TIMING);
    const fail = (reason: FailureReason): TurnOutcome => ({
      status: "failed",
      assistantText: "",
      reason,
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 },
    });
    let outcome: TurnOutcome;
    try {
      await recorder?.user(req.prompt, req.attachments);
    } catch {
      return fail("persistence"); // nothing durable was accepted: no terminal record either
    }
    try {
      outcome = await this.execute(req, recorder);
    } catch (e) {
      outcome = fail(e instanceof TurnFailure ? e.reason : "internal");
      if (req.signal.aborted) outcome = { ...outcome, status: "cancelled" };
    }
    if (recorder !== null) {
      await recorder.settled();
      if (recorder.failure !== null && outcome.status === "completed") outcome = { ...outcome, status: "failed", reason: "persistence" };
      try {
        await recorder.terminal(outcome.status, outcome.assistantText);
      } catch {
        if (outcome.status === "completed") outcome = { ...outcome, status: "failed", reason: "persistence" };
      }
    }
    return outcome;
  }

  private async execute(req: RunTurnRequest, recorder: TurnRecorder | null): Promise<TurnOutcome> {
    // Skill discovery (stat-only when cached) runs alongside settings resolution; tool-free turns have none.
    const skills = req.noTools === true ? Promise.resolve([]) : this.skills.discover(req.cwd).catch((): Skill[] => []);
    const r = await this.resolve(req.selection, req.mcpServers);
    const entry = req.noTools === true ? null : this.acquireTools(r);
    try {
      return await this.run(req, recorder, r, entry === null ? null : await entry.reg, await skills);
    } finally {
      if (entry !== null) this.releaseTools(entry);
    }
  }

  private async run(req: RunTurnRequest, recorder: TurnRecorder | null, r: Resolved, registry: ToolRegistry | null, skills: Skill[]): Promise<TurnOutcome> {
    const bound =
      registry !== null && req.sessionId !== undefined && this.o.sessionTools !== undefined
        ? this.o.sessionTools({
            sessionId: req.sessionId,
            depth: req.delegationDepth ?? 0,
            cwd: req.cwd,
            unattended: (name, risk) => (req.approval === undefined || req.approval.policy(name, risk) === "auto" || req.autoApprove === true ? "approve" : "deny"),
          })
        : [];
    // `chat_attach` is offered only to chat-channel sessions (their bridge sends what it attaches).
    const tools = [...(registry?.tools ?? []).filter((t) => req.channel !== undefined || t.spec.name !== CHAT_ATTACH_TOOL_NAME), ...bound];
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
    const sink = withLifecycle(req.sink);
    const outcome = await runLoop({
      turnId: req.turnId,
      provider: r.provider,
      model: r.selection.model_id,
      system,
      messages,
      tools,
      subagents,
      ...(req.steer !== undefined ? { steer: req.steer } : {}),
      ...(req.workspace !== undefined ? { workspace: req.workspace } : {}),
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
      const r = await this.resolve(selection);
      return { providerId: r.selection.provider_id, modelId: r.selection.model_id, contextWindow: r.selection.context_window ?? FALLBACK_CONTEXT_WINDOW, images: r.images };
    } catch {
      return null;
    }
  }

  /** Stops MCP servers. Call once no turn is running. */
  async close(): Promise<void> {
    const entries = [...this.retired, ...(this.registry ? [this.registry] : [])];
    this.registry = null;
    this.retired.clear();
    await Promise.all([...entries.map((e) => e.reg.then((reg) => reg.close()).catch(() => undefined)), ...this.closing]);
  }
}
