/**
 * The AHP chat and session reducers for clients (the web UI uses them; they run in a browser or
 * in Node: no DOM, no I/O). Written from the AHP reducer semantics the host applies
 * (`src/protocols/host/reducer.ts`); a test replays real envelopes from the daemon over an older
 * snapshot and checks the result equals a fresh snapshot.
 *
 * Contract: `reduceChat` mutates the chat it is given, except that a turn is never mutated after
 * it is appended to `turns` (completed turns are new objects), so views may memoize them by
 * identity. `reduceSession` returns a new session object. Unknown actions and stale turn ids are
 * no-ops.
 */
export type Json = Record<string, unknown>;

export interface Part {
  kind: string;
  id?: string;
  content?: string;
  toolCall?: Json;
  request?: Json;
  response?: string;
  error?: { errorType: string; message: string };
  /** On an error part: the turn may be reopened (`chat/turnResume`). */
  resumable?: boolean;
}
export interface Turn {
  id: string;
  startedAt?: string;
  duration?: number;
  message: { text: string; origin?: Json };
  responseParts: Part[];
  usage?: Json;
  state?: "complete" | "cancelled" | "error";
  /** A turn that ended in error: what the error was. */
  error?: { errorType: string; message: string };
}
export interface Pending {
  id: string;
  message: { text: string };
}
export interface Chat {
  resource: string;
  title: string;
  status: number;
  modifiedAt?: string;
  turns: Turn[];
  /** Undefined between turns (cleared when a turn ends). */
  activeTurn?: Turn | undefined;
  /** Undefined when no steering message is pending (cleared when it is consumed or removed). */
  steeringMessage?: Pending | undefined;
  queuedMessages: Pending[];
  /** Present while older turns can be fetched (`fetchTurns`). */
  turnsNextCursor?: string | undefined;
  /** Bumped on every change, for views that memoize on it. */
  rev: number;
  /** What the agent is doing now (`chat/activityChanged`); undefined when cleared. */
  activity?: string | undefined;
  /** The message being composed, shared between clients (`chat/draftChanged`); undefined when cleared. */
  draft?: Json | undefined;
  /** The chat's subset of the session's working directories; undefined: the whole set. */
  workingDirectories?: string[] | undefined;
  /** Shells and subagents the chat left running (`chat/backgroundWorkSet`/`Removed`). */
  backgroundWork?: Json[] | undefined;
  /** The chat's changeset catalogue (`chat/changesetsChanged`); undefined when cleared. */
  changesets?: Json[] | undefined;
}
export interface ChatSummaryRef {
  resource: string;
  title: string;
  status?: number;
  modifiedAt?: string;
}
export interface SessionState extends Json {
  provider: string;
  title: string;
  lifecycle: "creating" | "ready" | "failed";
  chats: ChatSummaryRef[];
  defaultChat?: string;
  inputNeeded?: Json[];
  customizations?: Json[];
  changesets?: Json[];
  /** The clients providing tools to the session (`session/activeClientSet` / `activeClientRemoved`). */
  activeClients?: Json[];
  creationError?: { message: string };
}

/** The session reducer; returns the next state (the input is not changed). */
export function reduceSession(s: SessionState, a: Json): SessionState {
  const next: SessionState = { ...s };
  switch (a.type) {
    case "session/ready":
      next.lifecycle = "ready";
      break;
    case "session/creationFailed":
      next.lifecycle = "failed";
      next.creationError = a.error as { message: string };
      break;
    case "session/titleChanged":
      next.title = a.title as string;
      break;
    case "session/chatAdded":
      next.chats = [...s.chats, a.summary as ChatSummaryRef];
      break;
    case "session/chatUpdated":
      next.chats = s.chats.map((c) => (c.resource === a.chat ? { ...c, ...(a.changes as Partial<ChatSummaryRef>) } : c));
      break;
    case "session/chatRemoved":
      next.chats = s.chats.filter((c) => c.resource !== a.chat);
      break;
    case "session/chatsReordered": {
      // An authoritative full order: applied only when it names every chat exactly once.
      const order = a.chats as string[];
      const by = new Map(s.chats.map((c) => [c.resource, c]));
      if (new Set(order).size === order.length && order.length === by.size && order.every((u) => by.has(u))) next.chats = order.map((u) => by.get(u)!);
      break;
    }
    case "session/inputNeededSet": {
      const r = a.request as Json;
      next.inputNeeded = [...(s.inputNeeded ?? []).filter((x) => x.id !== r.id), r];
      break;
    }
    case "session/inputNeededRemoved":
      next.inputNeeded = (s.inputNeeded ?? []).filter((x) => x.id !== a.id);
      if (next.inputNeeded.length === 0) delete next.inputNeeded;
      break;
    case "session/metaChanged":
      // Full replacement (the host's `paratenic.inputAvailable`, `paratenic.identity`, ...).
      if (a._meta && typeof a._meta === "object" && Object.keys(a._meta).length > 0) next._meta = a._meta;
      else delete next._meta;
      break;
    case "session/customizationsChanged":
      next.customizations = a.customizations as Json[];
      break;
    case "session/changesetsChanged":
      next.changesets = a.changesets as Json[];
      break;
    case "session/activityChanged":
      if (typeof a.activity === "string") next.activity = a.activity;
      else delete next.activity;
      break;
    case "session/defaultChatChanged":
      if (typeof a.defaultChat === "string") next.defaultChat = a.defaultChat;
      else delete next.defaultChat;
      break;
    case "session/serverToolsChanged":
      next.serverTools = a.tools;
      break;
    case "session/activeClientSet": {
      // Upsert keyed by clientId (a client joins or refreshes its tools).
      const e = a.activeClient as Json;
      const list = s.activeClients ?? [];
      next.activeClients = list.some((x) => x.clientId === e.clientId) ? list.map((x) => (x.clientId === e.clientId ? e : x)) : [...list, e];
      break;
    }
    case "session/activeClientRemoved":
      next.activeClients = (s.activeClients ?? []).filter((x) => x.clientId !== a.clientId);
      break;
    case "session/isReadChanged":
    case "session/isArchivedChanged": {
      // Status flags (IsRead 32, IsArchived 64) beside the activity bits.
      const flag = a.type === "session/isReadChanged" ? 32 : 64;
      const on = a.type === "session/isReadChanged" ? a.isRead === true : a.isArchived === true;
      const st = typeof s.status === "number" ? s.status : 1;
      next.status = on ? st | flag : st & ~flag;
      break;
    }
    case "session/workingDirectorySet":
    case "session/workingDirectoryRemoved":
    case "session/workingDirectoryReplaced": {
      const dirs = Array.isArray(s.workingDirectories) ? (s.workingDirectories as string[]) : [];
      const d = a.directory as string;
      const by = a.replacement as string;
      if (a.type === "session/workingDirectorySet") next.workingDirectories = dirs.includes(d) ? dirs : [...dirs, d];
      else if (a.type === "session/workingDirectoryRemoved") next.workingDirectories = dirs.filter((x) => x !== d);
      else if (!dirs.includes(by)) next.workingDirectories = dirs.map((x) => (x === d ? by : x));
      break;
    }
    case "session/mcpServerStateChanged":
      if (next.customizations)
        next.customizations = next.customizations.map((c) => {
          if (c.id !== a.id) return c;
          const u: Json = { ...c, state: a.state };
          if (a.channel === undefined) delete u.channel;
          else u.channel = a.channel;
          return u;
        });
      break;
    case "session/mcpServerBackgroundRequested":
      // Clears `blocking` on a starting MCP server (upstream session reducer).
      if (next.customizations)
        next.customizations = next.customizations.map((c) => {
          const st = c.state as Json | undefined;
          if (c.id !== a.id || st?.kind !== "starting" || st.blocking === undefined) return c;
          const state: Json = { ...st };
          delete state.blocking;
          return { ...c, state };
        });
      break;
  }
  return next;
}

function findPart(t: Turn, id: string): Part | undefined {
  for (let i = t.responseParts.length - 1; i >= 0; i--) if (t.responseParts[i]!.id === id) return t.responseParts[i];
  return undefined;
}
function findTool(t: Turn | undefined, turnId: unknown, id: unknown): Json | undefined {
  if (!t || t.id !== turnId) return undefined;
  for (const p of t.responseParts) if (p.kind === "toolCall" && p.toolCall!.toolCallId === id) return p.toolCall;
  return undefined;
}
const OPEN_TOOL = new Set(["streaming", "pending-confirmation", "running", "pending-result-confirmation", "auth-required"]);
/** An open tool call its turn's end cancels: what it keeps (as the host's own reducer does). */
function skipped(tc: Json): Json {
  const keep: Json = { toolCallId: tc.toolCallId, toolName: tc.toolName, displayName: tc.displayName, invocationMessage: tc.invocationMessage ?? tc.displayName };
  if (tc.contributor) keep.contributor = tc.contributor;
  return { ...keep, status: "cancelled", reason: "skipped" };
}

/** The chat reducer (host semantics); unknown actions and stale turn ids are no-ops. */
export function reduceChat(c: Chat, a: Json): void {
  const t = c.activeTurn;
  switch (a.type) {
    case "chat/turnStarted":
      c.activeTurn = { id: a.turnId as string, startedAt: a.startedAt as string, message: a.message as Turn["message"], responseParts: [] };
      if (typeof a.queuedMessageId === "string") {
        c.queuedMessages = c.queuedMessages.filter((m) => m.id !== a.queuedMessageId);
        if (c.steeringMessage?.id === a.queuedMessageId) c.steeringMessage = undefined;
      }
      return;
    case "chat/pendingMessageSet": {
      const m = { id: a.id as string, message: a.message as { text: string } };
      if (a.kind === "steering") c.steeringMessage = m;
      else c.queuedMessages = [...c.queuedMessages.filter((x) => x.id !== m.id), m];
      return;
    }
    case "chat/pendingMessageRemoved":
      if (a.kind === "steering") {
        if (c.steeringMessage?.id === a.id) c.steeringMessage = undefined;
      } else c.queuedMessages = c.queuedMessages.filter((m) => m.id !== a.id);
      return;
    case "chat/workingDirectorySet":
    case "chat/workingDirectoryRemoved": {
      const mine = c.workingDirectories ?? [];
      const d = a.directory as string;
      if (a.type === "chat/workingDirectorySet") c.workingDirectories = mine.includes(d) ? mine : [...mine, d];
      else if (c.workingDirectories) c.workingDirectories = mine.filter((x) => x !== d);
      return;
    }
    case "chat/draftChanged":
      c.draft = a.draft as Json | undefined;
      if (c.draft === undefined) delete c.draft;
      return;
    case "chat/queuedMessagesReordered": {
      // Named IDs first, in order; unnamed ones keep their order at the end.
      const order = (a.order as string[]).filter((id) => c.queuedMessages.some((m) => m.id === id));
      c.queuedMessages = [...order.map((id) => c.queuedMessages.find((m) => m.id === id)!), ...c.queuedMessages.filter((m) => !order.includes(m.id))];
      return;
    }
    case "chat/inputAnswerChanged": {
      const p = t?.responseParts.find((x) => x.kind === "inputRequest" && x.request!.id === a.requestId && x.response === undefined);
      if (!p) return;
      const answers: Json = { ...((p.request!.answers as Json | undefined) ?? {}) };
      if (a.answer === undefined) delete answers[a.questionId as string];
      else answers[a.questionId as string] = a.answer;
      const request: Json = { ...p.request! };
      if (Object.keys(answers).length > 0) request.answers = answers;
      else delete request.answers;
      p.request = request;
      return;
    }
    case "chat/responsePart":
      if (t && t.id === a.turnId) t.responseParts.push({ ...(a.part as Part) });
      return;
    case "chat/delta":
    case "chat/reasoning": {
      if (!t || t.id !== a.turnId) return;
      const p = findPart(t, a.partId as string);
      if (p) p.content = (p.content ?? "") + (a.content as string);
      return;
    }
    case "chat/toolCallStart":
      if (t && t.id === a.turnId)
        t.responseParts.push({
          kind: "toolCall",
          toolCall: {
            toolCallId: a.toolCallId, toolName: a.toolName, displayName: a.displayName,
            ...(a.intention !== undefined ? { intention: a.intention } : {}), ...(a.contributor ? { contributor: a.contributor } : {}), status: "streaming",
          },
        });
      return;
    case "chat/toolCallDelta": {
      // Only a streaming call takes input deltas: `content` appends, `invocationMessage` replaces.
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (tc?.status !== "streaming") return;
      tc.partialInput = (typeof tc.partialInput === "string" ? tc.partialInput : "") + (a.content as string);
      if (a.invocationMessage !== undefined) tc.invocationMessage = a.invocationMessage;
      return;
    }
    case "chat/activityChanged":
      c.activity = typeof a.activity === "string" ? a.activity : undefined;
      return;
    case "chat/toolCallContentChanged": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (tc?.status === "running") tc.content = a.content;
      return;
    }
    case "chat/toolCallAuthRequired": {
      // Only a running call contributed by an MCP server pauses for authentication.
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (tc?.status === "running" && (tc.contributor as Json | undefined)?.kind === "mcp") Object.assign(tc, { status: "auth-required", auth: a.auth });
      return;
    }
    case "chat/toolCallAuthResolved": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (tc?.status !== "auth-required") return;
      tc.status = "running";
      delete tc.auth;
      return;
    }
    case "chat/toolCallReady": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (!tc || (tc.status !== "streaming" && tc.status !== "running")) return;
      delete tc.partialInput; // the streamed input gives way to toolInput
      tc.invocationMessage = a.invocationMessage;
      if (a.toolInput !== undefined) tc.toolInput = a.toolInput;
      if (a.confirmed) Object.assign(tc, { status: "running", confirmed: a.confirmed });
      else {
        tc.status = "pending-confirmation";
        delete tc.confirmed;
        for (const k of ["confirmationTitle", "editable", "options"]) if (a[k] !== undefined) tc[k] = a[k];
      }
      return;
    }
    case "chat/toolCallConfirmed": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (!tc || tc.status !== "pending-confirmation") return;
      if (a.approved) Object.assign(tc, { status: "running", confirmed: a.confirmed ?? "user-action" });
      else Object.assign(tc, { status: "cancelled", reason: a.reason ?? "denied" });
      return;
    }
    case "chat/toolCallComplete": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (!tc || (tc.status !== "running" && tc.status !== "pending-confirmation" && tc.status !== "auth-required")) return;
      const paused = tc.status === "auth-required";
      // A call waiting for authentication completes only with a failed result (a cancel).
      if (paused && (a.result as Json).success !== false) return;
      delete tc.auth;
      Object.assign(tc, a.result as Json, { status: a.requiresResultConfirmation && !paused ? "pending-result-confirmation" : "completed" });
      return;
    }
    case "chat/toolCallResultConfirmed": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (!tc || tc.status !== "pending-result-confirmation") return;
      if (a.approved) tc.status = "completed";
      else Object.assign(tc, { status: "cancelled", reason: "result-denied" });
      return;
    }
    case "chat/usage":
      if (t && t.id === a.turnId) t.usage = a.usage as Json;
      return;
    case "chat/inputRequested": {
      const req = a.request as Json;
      if (!t) return;
      const existing = t.responseParts.find((p) => p.kind === "inputRequest" && p.request!.id === req.id && p.response === undefined);
      // A replacement without answers keeps the answers drafted so far.
      if (existing) existing.request = req.answers === undefined && existing.request!.answers !== undefined ? { ...req, answers: existing.request!.answers } : req;
      else t.responseParts.push({ kind: "inputRequest", request: req });
      return;
    }
    case "chat/inputCompleted": {
      const p = t?.responseParts.find((x) => x.kind === "inputRequest" && x.request!.id === a.requestId);
      if (p) p.response = a.response as string;
      return;
    }
    case "chat/turnComplete":
    case "chat/turnCancelled":
    case "chat/error": {
      if (!t || t.id !== a.turnId) return;
      const parts = t.responseParts.map((p) =>
        p.kind === "toolCall" && OPEN_TOOL.has(p.toolCall!.status as string) ? { ...p, toolCall: skipped(p.toolCall!) } : p,
      );
      if (a.type === "chat/error") parts.push((a.part as Part | undefined) ?? { kind: "error", ...(a.error === undefined ? {} : { error: a.error as NonNullable<Part["error"]> }) });
      const state = a.type === "chat/turnComplete" ? "complete" : a.type === "chat/turnCancelled" ? "cancelled" : "error";
      // A new object: completed turns are immutable from here on.
      const error = a.type === "chat/error" && a.error !== undefined ? { error: a.error as NonNullable<Turn["error"]> } : {};
      c.turns = [...c.turns, { ...t, responseParts: parts, duration: a.duration as number, state, ...error }];
      c.activeTurn = undefined;
      return;
    }
    case "chat/turnResume": {
      // Only the latest turn, ended in error with a resumable last error part, and no turn running.
      const last = c.turns.at(-1);
      const part = last?.responseParts.at(-1);
      if (t || !last || last.id !== a.turnId || last.state !== "error" || part?.kind !== "error" || part.resumable !== true) return;
      c.turns = c.turns.slice(0, -1);
      const reopened: Turn = { id: last.id, message: last.message, responseParts: [...last.responseParts] };
      if (last.startedAt !== undefined) reopened.startedAt = last.startedAt;
      if (last.usage !== undefined) reopened.usage = last.usage;
      c.activeTurn = reopened;
      return;
    }
    case "chat/backgroundWorkSet": {
      const w = a.work as Json;
      const list = c.backgroundWork ?? [];
      c.backgroundWork = list.some((x) => x.id === w.id) ? list.map((x) => (x.id === w.id ? w : x)) : [...list, w];
      return;
    }
    case "chat/backgroundWorkRemoved":
      if (c.backgroundWork?.some((x) => x.id === a.id)) c.backgroundWork = c.backgroundWork.filter((x) => x.id !== a.id);
      return;
    case "chat/changesetsChanged":
      c.changesets = Array.isArray(a.changesets) ? (a.changesets as Json[]) : undefined;
      return;
    case "chat/turnsLoaded": {
      const have = new Set(c.turns.map((x) => x.id));
      c.turns = [...(a.turns as Turn[]).filter((x) => !have.has(x.id)), ...c.turns];
      c.turnsNextCursor = typeof a.turnsNextCursor === "string" ? a.turnsNextCursor : undefined;
      return;
    }
  }
}
