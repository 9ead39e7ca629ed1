/**
 * The fixed ACP errors Berth answers with. Contract: every message is a constant sentence naming the cause and the
 * fix; no exception text, path, credential or provider body ever reaches the wire. Codes are ACP's `ErrorCode`s.
 * A `-32002` for a session carries the requested ID as `data.sessionId` (ACP's `SessionNotFoundErrorData`, what the
 * SDK's `RequestError.sessionNotFound` sends), so a client with several sessions knows which one is gone.
 */
import { RequestError } from "@agentclientprotocol/sdk";

/** Turns one `berth acp` runs at once: each holds its session's writer lease, at most 16 per process (the store's bound). */
export const MAX_RUNNING_TURNS = 16;

/** MCP servers an editor may attach to one session (each is a process started at its first turn). */
export const MAX_SESSION_MCP_SERVERS = 64;

/** Sessions one `berth acp` keeps open at once (each holds a runtime in memory until `session/close`). */
export const MAX_OPEN_SESSIONS = 1024;

export const ACP_ERRORS = {
  unknownSession: (sessionId: string) =>
    new RequestError(
      -32002,
      "Resource not found: no open session with this sessionId on this connection; open it with session/load or session/resume first",
      { sessionId },
    ),
  /** A request read behind a `session/load` or `session/resume` of its session that failed: that failure, named. */
  openFailed: (sessionId: string, method: string, cause: string) =>
    new RequestError(
      -32002,
      `Resource not found: the ${method} of this session sent before this request failed, so the session is not open on this connection (${cause}); open it again, then send this request`,
      { sessionId },
    ),
  sessionMissing: (sessionId: string) =>
    new RequestError(-32002, "Resource not found: no stored Berth session has this sessionId; list them with session/list", { sessionId }),
  sessionBusy: () =>
    new RequestError(-32600, "Invalid request: another Berth process is running a turn in this session (it holds the session's writer lease); wait for it or close it there"),
  relativeCwd: () => new RequestError(-32602, "Invalid params: cwd must be an absolute path"),
  /** `why`: a fixed sentence ("cwd does not exist", "cwd is not a directory", "cwd is not valid Unicode …"); never the path. */
  badCwd: (why: string) => new RequestError(-32602, `Invalid params: ${why}; give the absolute path of an existing directory`),
  badCursor: () => new RequestError(-32602, "Invalid params: cursor is not one this agent returned; start again without a cursor"),
  unknownAuthMethod: () => new RequestError(-32602, "Invalid params: unknown authentication method; use a methodId from initialize's authMethods"),
  authRequired: () =>
    new RequestError(
      -32000,
      "Authentication required: the selected provider has no credentials; call authenticate, set the provider's API key variable, or pick another provider in settings.json",
    ),
  loginFailed: (state: string) => new RequestError(-32000, `Authentication required: the sign-in ended '${state}'; call authenticate again`),
  promptRunning: () =>
    new RequestError(-32600, "Invalid request: a prompt turn is already running in this session; wait for its stopReason or send session/cancel"),
  tooManyTurns: () =>
    new RequestError(
      -32600,
      `Invalid request: this berth acp is already running ${MAX_RUNNING_TURNS} prompt turns (in ${MAX_RUNNING_TURNS} sessions), as many as it runs at once; wait for one of them to end (its stopReason) and send this prompt again`,
    ),
  tooManySessions: () =>
    new RequestError(
      -32600,
      `Invalid request: this berth acp already has ${MAX_OPEN_SESSIONS} sessions open, as many as it keeps; close one you no longer use with session/close and send this again`,
    ),
  loadDuringTurn: () =>
    new RequestError(
      -32600,
      "Invalid request: a prompt turn is running in this session, and a replay now would mix with its live updates; wait for its stopReason (or send session/cancel) before session/load, or use session/resume, which does not replay",
    ),
  loadWhileRunningElsewhere: () =>
    new RequestError(
      -32600,
      "Invalid request: another Berth process is running a turn in this session (it holds the session's writer lease), and a replay now would show its answer unfinished; wait for that turn to end and send session/load again",
    ),
  tooManyTurnsToLoad: () =>
    new RequestError(
      -32600,
      `Invalid request: this berth acp is already running ${MAX_RUNNING_TURNS} prompt turns, as many as it runs at once, and loading this session must first close the turn a Berth process that stopped left unfinished in it; wait for one of those turns to end (its stopReason) and send session/load again`,
    ),
  loading: () => new RequestError(-32600, "Invalid request: a session/load of this session is still replaying its history; send this request after its answer"),
  tooManyMcpServers: () =>
    new RequestError(
      -32602,
      `Invalid params: mcpServers lists more than ${MAX_SESSION_MCP_SERVERS} servers, as many as Berth starts for one session; attach only the ones this session needs`,
    ),
  mcpTransport: () =>
    new RequestError(-32602, "Invalid params: Berth attaches MCP servers over stdio only (mcpCapabilities http and sse are false); give a command instead"),
  unknownMode: () => new RequestError(-32602, "Invalid params: unknown modeId; use one of the session's availableModes"),
  unknownConfig: () => new RequestError(-32602, "Invalid params: unknown configId or value; use the ids and values of the session's configOptions"),
  unsupportedContent: (type: string) =>
    new RequestError(-32602, `Invalid params: prompt content of type '${type}' is not accepted; see promptCapabilities in the initialize answer`),
  historyTooLarge: () =>
    new RequestError(-32603, "Internal error: this session's history is too large to load into the model's context; start a new session"),
  /** `problem`: the store's fixed sentence for a cause the user can fix (a full disk, …), when the failure had one. */
  storage: (problem?: string) =>
    new RequestError(
      -32603,
      problem !== undefined ? `Internal error: Berth's session store is unavailable: ${problem}` : "Internal error: Berth's session store is unavailable; check MC_HOME's permissions and free space",
    ),
  internal: () => new RequestError(-32603, "Internal error: Berth could not complete this request; see its stderr log"),
} as const;
