/**
 * The SCV composition root shared by `berth stdio` and the daemon socket: one agent, one durable session store and
 * one `SessionHub` per process; each connection's `session.start` creates a durable session through the hub and
 * projects its `SessionRuntime` (protocols/scv/session.ts).
 *
 * Test seams (environment, clamped): `BERTH_SCV_SEND_TIMEOUT_MS` (how long a blocked send may last before cleanup,
 * default 3000) and `BERTH_SCV_CLEANUP_GRACE_MS` (the cleanup grace, default 3000).
 */
import { fileURLToPath } from "node:url";
import type { EnvLike } from "../store/home.js";
import { wellFormedText } from "../core/text-policy.js";
import type { BerthDelegates } from "./delegates/agent-berth.js";
import type { CliAgents } from "./delegates/cli-agents.js";
import type { ReportRuntime } from "./delegates/report-turns.js";
import type { ScvServerDeps } from "../protocols/scv/connection.js";
import { ScvSession, type AttachmentChecker } from "../protocols/scv/session.js";
import { MAX_PROMPT_HISTORY_BYTES, MAX_PROMPT_HISTORY_ITEMS, MAX_SERVER_FRAME_BYTES, MAX_TRANSCRIPT_BYTES, MAX_TRANSCRIPT_ITEMS } from "../protocols/scv/wire.js";
import type { ApprovalMode, SessionHub } from "../runtime/session/index.js";
import type { Agent, SessionModelInfo } from "../runtime/agent.js";
import { packageVersion } from "./process-io.js";
import { mark } from "../runtime/debug-timing.js";
import { scvTimings } from "./scv-lazy.js";
import { isValidSessionId, SessionManager, SessionStore, storageProblemOf } from "../store/sessions/index.js";
import * as files from "../runtime/session/files.js";
import { SettingsStore } from "../store/settings/settings-store.js";
import { onceLogger, sessionApprovalPolicy } from "../store/settings/approval-policy.js";
import { findProvider } from "../store/catalog/providers.js";
import { FALLBACK_CONTEXT_WINDOW } from "../runtime/context.js";
import { ExecutableResolver } from "./delegates/executables.js";
import { AGENT_BERTH_DEF, AGENT_CANCEL_DEF, AGENT_STATUS_DEF, AGENT_WAIT_DEF, CLI_AGENTS, cliAgentDef } from "./delegates/tool-defs.js";
import { lazyTool } from "../runtime/tools/lazy.js";
import type { Tool } from "../runtime/types.js";
import type { SessionToolContext } from "../runtime/agent.js";

/**
 * How long a resuming `session.start` waits for a session that a connection of this process that has ended is still
 * releasing (its cancelled turn stopping: a tool's SIGTERM grace, say) before it refuses.
 */
export const RESUME_RELEASE_WAIT_MS = 10_000;

/** Sessions of this process that may hold a turn's writer lease at once (one per connection running a turn). */
export const MAX_RUNNING_SESSIONS = 256;
/** The refusal of a `session.start` (new or resumed) past MAX_RUNNING_SESSIONS: the cap and the ways on. */
export const SESSION_CAP_MESSAGE = `this server already holds ${MAX_RUNNING_SESSIONS} sessions, its limit (one per connection); end another connection's session, or connect to another Berth process, and send session.start again`;

export interface ScvDepsOptions {
  home: string;
  env: EnvLike;
  transport: "stdio" | "socket";
  log: (line: string) => void;
  daemonControl?: ScvServerDeps["daemonControl"];
  /**
   * Leaves the agent and hub modules unloaded until `loadRuntime()` or a `session.start` asks for them (`berth stdio`:
   * its preload loads them one event-loop turn later, so a `session.start` already waiting is read first and its
   * file's creation and fsyncs start before their synchronous load, which then runs inside the fsyncs' wait).
   */
  deferRuntime?: boolean;
}

const BERTH_BIN = fileURLToPath(new URL("../../../bin/berth", import.meta.url));
export const DEFAULT_MAX_DELEGATION_DEPTH = 2;

/** `SCV_DELEGATION_DEPTH` of this process (0 when unset or not a small non-negative integer). */
function envDepth(env: EnvLike): number {
  const v = env["SCV_DELEGATION_DEPTH"] ?? "";
  return /^\d{1,3}$/.test(v) ? Number(v) : 0;
}

/** `agent.max_delegation_depth` (project over global, an integer 0..16; default 2), read once at start. */
async function maxDelegationDepth(settings: { load(): Promise<{ project?: unknown; global?: unknown }> }): Promise<number> {
  const layers = await settings.load().catch(() => null);
  for (const l of [layers?.project, layers?.global]) {
    const agent = (l as Record<string, unknown> | undefined)?.["agent"] as Record<string, unknown> | undefined;
    const v = agent?.["max_delegation_depth"];
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 && v <= 16) return v;
  }
  return DEFAULT_MAX_DELEGATION_DEPTH;
}

/**
 * Builds in two stages: the stores a `session.start` needs to create its durable session (sessions, settings,
 * workspace checks) are this module's own imports (one lazy boundary, not five: each dynamic import of a module
 * shared with other paths costs the bundle a stub file to load); the agent and the session hub (the turn path's
 * first half) load when this is called, while a `session.start` checks its workspace and creates the session file
 * (its fsync overlaps their compilation), and `openSession` awaits them only to open the runtime.
 */
export function buildScvDeps(o: ScvDepsOptions): Promise<{
  deps: ScvServerDeps;
  /**
   * Loads the turn path now (the agent, the loop, the selected driver) instead of after the first `session.start` is
   * answered: for a caller whose first session and turn will follow anyway (`berth chat -p`).
   */
  warm(): void;
  /** Starts loading the agent and hub modules (with `deferRuntime`; otherwise they load at once). Idempotent. */
  loadRuntime(): void;
  close(): Promise<void>;
}> {
  const cwd = process.cwd();
  const settings = new SettingsStore({ home: o.home, projectDir: cwd, env: o.env });
  // Read once, when the first tools are built (a session's start does not wait for it). Not at build: a first
  // `session.start` reads the settings only once its file's creation has started (its fsyncs are then under way).
  let maxDepthRead: Promise<number> | null = null;
  /** This process's own depth among delegated agents (set by the Berth or agent that started it). */
  const ownDepth = envDepth(o.env);
  // Declared before the hub exists; reports only run once a job has ended, long after construction.
  let hubRef: { get(id: string): ReportRuntime | undefined } | null = null;
  /**
   * The delegated-agent tools (`agent_berth`, the CLI agents and their background jobs) load after a session is
   * answered (with the turn path) or when a turn first asks for them, so `session.start` does not wait for them.
   */
  let delegation: { delegates: BerthDelegates; codex: CliAgents } | null = null;
  let delegationLoad: Promise<{ delegates: BerthDelegates; codex: CliAgents }> | null = null;
  const loadDelegation = (): Promise<{ delegates: BerthDelegates; codex: CliAgents }> => {
    if (delegationLoad === null) {
      delegationLoad = Promise.all([
        import("./delegates/agent-berth.js"),
        import("./delegates/cli-agents.js"),
        import("./delegates/jobs.js"),
        import("./delegates/report-turns.js"),
      ]).then(
        ([{ BerthDelegates }, { CliAgents }, { JobBook }, { reportTurns }]) => {
          const jobs = new JobBook(reportTurns((sessionId) => hubRef?.get(sessionId)));
          const delegates = new BerthDelegates({
            jobs,
            home: o.home,
            berthBin: BERTH_BIN,
            env: process.env,
            log: o.log,
          });
          const codex = new CliAgents({ jobs, home: o.home, env: process.env });
          return (delegation = { delegates, codex });
        },
      );
      delegationLoad.catch(() => (delegationLoad = null));
    }
    return delegationLoad;
  };
  /** PATH lookups of the delegate CLIs for the stand-ins (the loaded CliAgents keeps its own). */
  const exes = new ExecutableResolver();
  /**
   * The delegation tools a session is offered (as `BerthDelegates.tools` and `CliAgents.tools` would list them), each
   * loading the delegation modules and running the real tool on its first call.
   */
  const delegationStandIns = (s: SessionToolContext, maxDepth: number): Tool[] => {
    if (s.depth + 1 > maxDepth) return [];
    const real = async (name: string): Promise<Tool> => {
      const d = await loadDelegation();
      const t = [...d.delegates.tools(s, maxDepth), ...d.codex.tools(s, maxDepth)].find((x) => x.spec.name === name);
      if (t === undefined) throw new Error(`${name} is no longer available`);
      return t;
    };
    const found = exes.resolve(CLI_AGENTS, process.env["PATH"]);
    const cli = CLI_AGENTS.filter((_, i) => found[i] !== undefined && found[i] !== null).map(cliAgentDef);
    return [
      lazyTool(AGENT_BERTH_DEF, () => real(AGENT_BERTH_DEF.name)),
      lazyTool(AGENT_WAIT_DEF, () => real(AGENT_WAIT_DEF.name)),
      lazyTool(AGENT_STATUS_DEF, () => real(AGENT_STATUS_DEF.name)),
      lazyTool(AGENT_CANCEL_DEF, () => real(AGENT_CANCEL_DEF.name)),
      ...cli.map((def) => lazyTool(def, () => real(def.name))),
    ];
  };
  /** The delegation, if it was ever loaded (a session that ran no turn may close before it loads). */
  const loadedDelegation = async (): Promise<{ delegates: BerthDelegates; codex: CliAgents } | null> => delegation ?? (await delegationLoad?.catch(() => null)) ?? null;
  // `question` (asked approval-style on SCV) for sessions that are not chat channels, whose users see no approvals.
  let questionHub: SessionHub | null = null;
  const questions = (s: { sessionId: string }) => (questionHub !== null && questionHub.get(s.sessionId)?.config.channel === undefined ? questionHub.questionTools(s) : []);
  /** `approval_policy` for a session working in `sessionCwd` (store/settings/approval-policy.ts). */
  const sayOnce = onceLogger(o.log);
  const approvalPolicy = async (sessionCwd: string): Promise<ApprovalMode> => {
    const r = await sessionApprovalPolicy({ home: o.home, env: o.env, launch: settings, launchDir: cwd }, sessionCwd);
    sayOnce(r.notes);
    return r.policy;
  };
  const manager = new SessionManager(new SessionStore({ home: o.home }), MAX_RUNNING_SESSIONS);
  /** The agent and the hub once built (null until then): `session.start` reads it without waiting a turn. */
  let builtRuntime: { agent: Agent; hub: SessionHub } | null = null;
  /** The agent and the hub, once their modules loaded (a failure refuses `session.start` with `internal_error`). */
  let runtimeLoad: Promise<{ agent: Agent; hub: SessionHub }> | null = null;
  const buildRuntime = (): Promise<{ agent: Agent; hub: SessionHub }> => {
    const loading = Promise.all([import("../runtime/agent.js"), import("../runtime/session/index.js")]).then(([{ Agent }, { SessionHub }]) => {
      const agent = new Agent({
        home: o.home,
        cwd,
        env: o.env,
        // The store this host reads too (the approval policy, once a session's file is being created): a new
        // session's model resolution then finds both settings layers decoded instead of reading them again.
        settings,
        sessionTools: async (s) => {
          const maxDepth = await (maxDepthRead ??= maxDelegationDepth(settings));
          // Until a delegation tool is first called, its stand-in (definition only) is offered: no child-process code
          // loads before a first request.
          const tools = delegation !== null ? [...delegation.delegates.tools(s, maxDepth), ...delegation.codex.tools(s, maxDepth)] : delegationStandIns(s, maxDepth);
          return [...tools, ...questions(s)];
        },
      });
      const hub = new SessionHub({ manager, runner: agent, defaults: { cwd } });
      hubRef = hub;
      questionHub = hub;
      builtRuntime = { agent, hub };
      return builtRuntime;
    });
    loading.catch(() => undefined);
    return loading;
  };
  const runtime = (): Promise<{ agent: Agent; hub: SessionHub }> => (runtimeLoad ??= buildRuntime());
  if (o.deferRuntime !== true) void runtime();
  /** The runtime, or null (logged) when it could not be built. */
  const loadedRuntime = (): Promise<{ agent: Agent; hub: SessionHub } | null> =>
    runtime().catch((err: unknown) => {
      o.log(`the session host could not start (${err instanceof Error ? err.name : "error"})`);
      return null;
    });
  /** Sessions whose connection has ended and which are being released (their turn stopping, their lease let go). */
  const releasing = new Map<string, Promise<void>>();
  const release = (id: string, work: () => Promise<void>): Promise<void> => {
    const p: Promise<void> = work().finally(() => {
      if (releasing.get(id) === p) releasing.delete(id);
    });
    releasing.set(id, p);
    return p;
  };
  /** Sessions a resuming `session.start` has claimed and is attaching (so two resumes never share one). */
  const resuming = new Set<string>();
  /** Attaches a stored session for a resuming `session.start`; its recorded cwd, or the refusal. */
  const resumable = async (id: string): Promise<{ cwd: string } | { code: "session_not_found" | "invalid_request" | "internal_error"; message: string }> => {
    if (!isValidSessionId(id)) return { code: "invalid_request", message: "`resume` is not a valid session ID" };
    const hub = (await loadedRuntime())?.hub;
    if (hub === undefined) return { code: "internal_error", message: "the session host could not start; see stderr" };
    // A client reconnecting after its connection dropped finds the session still held by that ended connection
    // while its cancelled turn stops: wait for that release (bounded) rather than call it in use by another.
    const deadline = Date.now() + RESUME_RELEASE_WAIT_MS;
    for (let held = releasing.get(id); held !== undefined; held = releasing.get(id)) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), Math.max(0, deadline - Date.now()))));
      const r = await Promise.race([held.then(() => "released" as const, () => "released" as const), late]);
      clearTimeout(timer);
      if (r === "late")
        return { code: "invalid_request", message: `that session's previous connection has ended but its turn has not stopped within ${RESUME_RELEASE_WAIT_MS / 1000} s; send session.start with resume again once it has` };
    }
    if (hub.get(id) !== undefined || manager.isAttached(id) || resuming.has(id)) return { code: "invalid_request", message: "that session is in use by another connection or Berth process" };
    resuming.add(id);
    try {
      const snap = await manager.store.readWindow(id, { maxBytes: 64 * 1024, maxRecords: 1, quantumBytes: 64 * 1024 });
      if (snap === "unchanged") return { code: "internal_error", message: "the session could not be read" };
      await manager.open(id);
      return { cwd: snap.header.cwd };
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (code === "busy") return { code: "invalid_request", message: "that session is in use by another connection or Berth process" };
      if (code === "limit") return { code: "invalid_request", message: SESSION_CAP_MESSAGE };
      // The session exists but its lease cannot be taken (a read-only or full disk): say why, not "not found".
      const problem = storageProblemOf(e);
      if (problem !== undefined) return { code: "internal_error", message: `the session could not be opened: ${problem}` };
      return { code: "session_not_found", message: "no stored session has that ID" };
    } finally {
      resuming.delete(id);
    }
  };
  const checkAttachments: AttachmentChecker = async (list) => {
    const r = await files.checkAttachmentFiles(list);
    if (!r.ok) return r;
    return {
      ok: true,
      attachments: list.map((a) => ({
        kind: a.kind,
        path: a.path,
        size: a.size,
        ...(a.name !== undefined ? { name: a.name } : {}),
        ...(a.mime !== undefined ? { mime: a.mime } : {}),
        // A voice message's transcript reaches the model with the prompt (runtime/session/attachments.ts).
        ...(a.transcript !== undefined ? { transcript: wellFormedText(a.transcript) } : {}),
      })),
    };
  };
  const deps: ScvServerDeps = {
    server: { name: "berth", version: packageVersion() },
    ...scvTimings(o.env),
    log: o.log,
    ...(o.daemonControl !== undefined ? { daemonControl: o.daemonControl } : {}),
    async openSession(msg, out) {
      mark("scv.session_start");
      // Checked synchronously (a realpath and a stat): a new session's file is then created, and its fsyncs started,
      // before this yields to anything queued behind it (the deferred runtime load, below).
      let ws = files.canonicalWorkspaceSync(msg.cwd);
      mark("scv.workspace_checked");
      if (!ws.ok) return { code: "invalid_request", message: ws.message, request_id: msg.request_id };
      // Berth extension (docs/scv.md §Resuming a stored session): continue a durable session in its own cwd.
      if (msg.resume !== undefined) {
        const r = await resumable(msg.resume);
        if ("code" in r) return { ...r, request_id: msg.request_id };
        const own = await files.canonicalWorkspace(r.cwd);
        if (own.ok) ws = own;
      }
      if (msg.provider !== undefined) {
        const layers = await settings.load().catch(() => null);
        if (layers === null || findProvider(layers.global, msg.provider) === undefined)
          return { code: "invalid_request", message: "unknown provider; declare it under `providers` in settings.json", request_id: msg.request_id };
      }
      // A URL that does not parse, or with control characters (which a URL parser would drop or encode), is refused
      // here rather than leaving a session whose every turn fails "no usable provider and model are selected".
      if (msg.base_url !== undefined && !(/^https?:\/\/[^\s\u0000-\u001f\u007f-\u009f]+$/.test(msg.base_url) && URL.canParse(msg.base_url)))
        return { code: "invalid_request", message: "`base_url` must be an http(s) URL", request_id: msg.request_id };
      const depth = Math.max(msg.delegation_depth ?? 0, ownDepth);
      const selection = {
        ...(msg.provider !== undefined ? { provider: msg.provider } : {}),
        ...(msg.model !== undefined ? { model: msg.model } : {}),
        ...(msg.base_url !== undefined ? { baseUrl: msg.base_url } : {}),
      };
      // A new session's model (what rt.describe() answers for it: the same selection) is resolved while its file is
      // created and fsynced; session.started still waits for its MCP servers to be registered (below), so a
      // session.mcp sent at once lists them. A process's first resolution is the longer of the two (settings and
      // catalog read and decoded for the first time), so it starts first when the agent is already built.
      const describeNew = (agent: Agent): Promise<SessionModelInfo | null> | null =>
        msg.resume === undefined ? agent.describe(Object.keys(selection).length > 0 ? selection : undefined).finally(() => mark("scv.model_resolved")) : null;
      let early = builtRuntime !== null ? describeNew(builtRuntime.agent) : null;
      // An explicit attachment for the connection's lifetime: this connection owns the session's writer lease,
      // so its turns reuse it instead of taking the lock again each time.
      const created = msg.resume !== undefined ? Promise.resolve(msg.resume) : manager.create(ws.value);
      created.catch(() => undefined);
      // The settings are read (a process's first read: both files decoded) once the file's fsyncs are under way,
      // so that wait, not this request, carries it; the runtime's modules compile inside the same wait.
      const policy = approvalPolicy(ws.value);
      // With `deferRuntime` the agent and hub modules may still be unloaded: they load now, while the fsyncs run.
      mark("scv.create_started");
      const built = await loadedRuntime();
      mark("scv.runtime_ready");
      if (built === null) {
        if (msg.resume === undefined) void created.then((id) => manager.close(id)).catch(() => undefined);
        return { code: "internal_error", message: "the session host could not start; see stderr", request_id: msg.request_id };
      }
      const { agent, hub } = built;
      early ??= describeNew(agent);
      let rt;
      try {
        const id = await created;
        mark("scv.session_created");
        rt = hub.open(id, {
          cwd: ws.value,
          ...(Object.keys(selection).length > 0 ? { selection } : {}),
          noTools: msg.no_tools,
          ...(msg.channel !== undefined ? { channel: msg.channel } : {}),
          ...(msg.mcp_servers !== undefined ? { mcpServers: msg.mcp_servers } : {}),
          autoApprove: msg.auto_approve,
          approval: await policy,
          ...(depth > 0 ? { delegationDepth: depth } : {}),
        });
        mark("scv.hub_opened");
      } catch (e) {
        // The session cap is the client's to resolve, not a storage fault: say so (it said "check that MC_HOME is
        // writable").
        if ((e as { code?: unknown }).code === "limit") return { code: "invalid_request", message: SESSION_CAP_MESSAGE, request_id: msg.request_id };
        // A cause the user can fix (a full disk, a read-only file system, …) is named with its fix.
        const problem = storageProblemOf(e);
        const message = problem !== undefined ? `the session could not be created: ${problem}` : "the session could not be created; check that MC_HOME is writable";
        return { code: "internal_error", message, request_id: msg.request_id };
      }
      const [described] = await Promise.all([early ?? rt.describe(), rt.mcpRegistered()]);
      mark("scv.session_described");
      const id = rt.id;
      const session = new ScvSession(rt, out, checkAttachments, () =>
        release(id, async () => {
          const d = await loadedDelegation();
          await d?.delegates.closeSession(id);
          d?.codex.forgetSession(id);
          await hub.closeSession(id);
          await manager.close(id).catch(() => undefined);
        }),
      );
      await session.announce(msg.request_id, {
        cwd: ws.value,
        model: described?.modelId ?? msg.model ?? null,
        context_max_tokens: described?.contextWindow ?? FALLBACK_CONTEXT_WINDOW,
        max_server_frame_bytes: MAX_SERVER_FRAME_BYTES,
        max_transcript_bytes: MAX_TRANSCRIPT_BYTES,
        max_transcript_items: MAX_TRANSCRIPT_ITEMS,
        max_prompt_history_bytes: MAX_PROMPT_HISTORY_BYTES,
        max_prompt_history_items: MAX_PROMPT_HISTORY_ITEMS,
      });
      // The session is announced: load the turn path now, so its first prompt finds it compiled (the delegation
      // tools' code loads when one is first called).
      setImmediate(() => void agent.warm());
      // A resumed session's runs left behind by a Berth process that died (SIGKILL) are stopped: with no daemon to
      // reap orphans they ran on unseen, and the session's earlier jobs are reported as ended (jobs.ts).
      if (msg.resume !== undefined)
        void import("../runtime/delegation/records.js")
          .then(({ stopOrphansOf }) => stopOrphansOf(o.home, id))
          .then((stopped) => stopped.length > 0 && o.log(`stopped delegated runs orphaned by an earlier Berth process of session ${id}: ${stopped.join(", ")}`))
          .catch(() => undefined);
      return session;
    },
  };
  return Promise.resolve({
    deps,
    warm: () => void runtime().then(({ agent }) => agent.warm()).catch(() => undefined),
    loadRuntime: () => void runtime(),
    close: async () => {
      await (await loadedDelegation())?.delegates.close();
      await (await runtimeLoad?.catch(() => null))?.hub.close();
      await manager.drain().catch(() => undefined);
    },
  });
}
