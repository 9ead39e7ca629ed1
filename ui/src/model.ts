/**
 * The UI's client-side state: the session list (root), opened sessions and chats, reduced from
 * AHP snapshots and action envelopes exactly as the host reduces them (chat reducer semantics of
 * `src/protocols/host/reducer.ts`). Completed turns are never mutated after they are appended,
 * so views may memoize them by identity; the active turn is mutated in place.
 *
 * Change notification is coalesced to one per animation frame, which keeps a 20,000-delta
 * answer cheap to render; `perf` records how far rendering trails the newest delta.
 */
import { ROOT, type ConnStatus, type Envelope, type Json, type Snapshot } from "./ahp.js";

export interface Part {
  kind: string;
  id?: string;
  content?: string;
  toolCall?: Json;
  request?: Json;
  response?: string;
  error?: { errorType: string; message: string };
}
export interface Turn {
  id: string;
  startedAt?: string;
  duration?: number;
  message: { text: string; origin?: Json };
  responseParts: Part[];
  usage?: Json;
  state?: "complete" | "cancelled" | "error";
}
export interface Pending {
  id: string;
  message: { text: string };
}
export interface Chat {
  resource: string;
  title: string;
  status: number;
  turns: Turn[];
  activeTurn?: Turn;
  steeringMessage?: Pending;
  queuedMessages: Pending[];
  /** Present while older turns can be fetched (`fetchTurns`). */
  turnsNextCursor?: string;
  /** Bumped on every change, for views that memoize on it. */
  rev: number;
}
export interface SessionSummary {
  resource: string;
  provider: string;
  title: string;
  status: number;
  activity?: string;
  createdAt?: string;
  modifiedAt?: string;
  workingDirectories?: string[];
  defaultChat?: string;
}
export interface SessionState extends Json {
  provider: string;
  title: string;
  lifecycle: "creating" | "ready" | "failed";
  chats: { resource: string; title: string }[];
  defaultChat?: string;
  inputNeeded?: Json[];
  creationError?: { message: string };
}
export interface Agent {
  provider: string;
  displayName: string;
  models: { id: string; name: string; provider: string }[];
}
export interface Notice {
  id: number;
  text: string;
}

/** Longest a received delta may wait for a render when frames are starved. */
const MAX_DEFER_MS = 40;

export const STATUS = { Idle: 1, Error: 2, InProgress: 8, InputNeeded: 16 } as const;

export function statusLabel(bits: number): "input needed" | "running" | "error" | "idle" {
  if (bits & STATUS.InputNeeded) return "input needed";
  if (bits & STATUS.InProgress) return "running";
  if (bits & STATUS.Error) return "error";
  return "idle";
}

export class Model {
  conn: { status: ConnStatus; detail?: string; everOpen: boolean } = { status: "connecting", everOpen: false };
  agents: Agent[] = [];
  sessions = new Map<string, SessionSummary>();
  sessionStates = new Map<string, SessionState>();
  chats = new Map<string, Chat>();
  notices: Notice[] = [];
  /** Sessions removed while this page watched them (their views close). */
  readonly removed = new Set<string>();
  /** Rendering lag of streamed deltas (ms): the oldest unrendered delta's wait until the next commit. */
  readonly perf = { deltas: 0, commits: 0, maxLagMs: 0, lastLagMs: 0, maxCommitMs: 0, listPaintedMs: -1 };
  private notifiedAt = 0;
  private pendingSince = 0;
  private listeners = new Set<() => void>();
  private scheduled = false;
  private generation = 0;
  private noticeSeq = 0;

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Coalesce notifications to one per frame (with a timer fallback for hidden tabs). Under a
   * flood of messages the browser may starve animation frames, so once the oldest unrendered
   * delta has waited `MAX_DEFER_MS`, listeners run at once (the render lands in this task).
   */
  changed(): void {
    if (this.pendingSince > 0 && performance.now() - this.pendingSince >= MAX_DEFER_MS) {
      this.generation++;
      this.scheduled = false;
      this.notify_();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    const gen = ++this.generation;
    const run = () => {
      if (gen !== this.generation) return;
      this.generation++;
      this.scheduled = false;
      this.notify_();
    };
    requestAnimationFrame(run);
    setTimeout(run, 100);
  }

  private notify_(): void {
    this.notifiedAt = performance.now();
    for (const l of this.listeners) l();
  }

  /** Called by the view after a commit that reflects the current state. */
  committed(): void {
    this.perf.commits++;
    if (this.notifiedAt > 0) this.perf.maxCommitMs = Math.max(this.perf.maxCommitMs, performance.now() - this.notifiedAt);
    this.notifiedAt = 0;
    if (this.pendingSince > 0) {
      const lag = performance.now() - this.pendingSince;
      this.perf.lastLagMs = lag;
      if (lag > this.perf.maxLagMs) this.perf.maxLagMs = lag;
      this.pendingSince = 0;
    }
  }

  notify(text: string): void {
    const n = { id: ++this.noticeSeq, text };
    this.notices = [...this.notices.slice(-3), n];
    setTimeout(() => {
      this.notices = this.notices.filter((x) => x !== n);
      this.changed();
    }, 8000);
    this.changed();
  }

  setConn(status: ConnStatus, detail?: string): void {
    // While reconnecting, keep showing why the last connection was lost.
    const why = detail ?? (status === "connecting" ? this.conn.detail : undefined);
    this.conn = { status, everOpen: this.conn.everOpen || status === "open", ...(why ? { detail: why } : {}) };
    this.changed();
  }

  setSessions(items: SessionSummary[]): void {
    this.sessions = new Map(items.map((s) => [s.resource, s]));
    this.changed();
  }

  applySnapshot(s: Snapshot): void {
    const st = s.state;
    if (s.resource === ROOT) this.agents = (st.agents as Agent[]) ?? [];
    else if (s.resource.startsWith("ahp-session:")) this.sessionStates.set(s.resource, st as SessionState);
    else {
      const c = st as unknown as Chat;
      this.chats.set(s.resource, { ...c, resource: s.resource, queuedMessages: c.queuedMessages ?? [], rev: 0 });
    }
    this.changed();
  }

  rootNotification(method: string, p: Json): void {
    if (method === "root/sessionAdded") {
      const sum = p.summary as SessionSummary;
      this.sessions = new Map([[sum.resource, sum], ...this.sessions]);
    } else if (method === "root/sessionRemoved") {
      this.sessions.delete(p.session as string);
      this.removed.add(p.session as string);
      this.sessionStates.delete(p.session as string);
      this.sessions = new Map(this.sessions);
    } else if (method === "root/sessionSummaryChanged") {
      const cur = this.sessions.get(p.session as string);
      if (cur) this.sessions.set(cur.resource, { ...cur, ...(p.changes as Partial<SessionSummary>) });
      this.sessions = new Map(this.sessions);
    } else return;
    this.changed();
  }

  envelope(env: Envelope): void {
    if (env.rejectionReason !== undefined) {
      if (env.origin) this.notify(`${env.action.type} refused: ${env.rejectionReason}`);
      return;
    }
    const a = env.action;
    if (env.channel === ROOT) {
      if (a.type === "root/agentsChanged") this.agents = a.agents as Agent[];
    } else if (env.channel.startsWith("ahp-session:")) this.reduceSession(env.channel, a);
    else {
      const c = this.chats.get(env.channel);
      if (!c) return;
      if (a.type === "chat/delta" || a.type === "chat/reasoning") {
        this.perf.deltas++;
        if (this.pendingSince === 0) this.pendingSince = performance.now();
      }
      reduceChat(c, a);
      c.rev++;
    }
    this.changed();
  }

  private reduceSession(uri: string, a: Json): void {
    const s = this.sessionStates.get(uri);
    const sum = this.sessions.get(uri);
    if (a.type === "session/titleChanged" && sum) this.sessions.set(uri, { ...sum, title: a.title as string });
    if (!s) return;
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
        next.chats = [...s.chats, a.summary as { resource: string; title: string }];
        break;
      case "session/chatRemoved":
        next.chats = s.chats.filter((c) => c.resource !== a.chat);
        break;
      case "session/inputNeededSet": {
        const r = a.request as Json;
        next.inputNeeded = [...(s.inputNeeded ?? []).filter((x) => x.id !== r.id), r];
        break;
      }
      case "session/inputNeededRemoved":
        next.inputNeeded = (s.inputNeeded ?? []).filter((x) => x.id !== a.id);
        break;
    }
    this.sessionStates.set(uri, next);
  }
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
const OPEN_TOOL = new Set(["streaming", "pending-confirmation", "running", "pending-result-confirmation"]);

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
        t.responseParts.push({ kind: "toolCall", toolCall: { toolCallId: a.toolCallId, toolName: a.toolName, displayName: a.displayName, status: "streaming" } });
      return;
    case "chat/toolCallReady": {
      const tc = findTool(t, a.turnId, a.toolCallId);
      if (!tc || (tc.status !== "streaming" && tc.status !== "running")) return;
      tc.invocationMessage = a.invocationMessage;
      if (a.toolInput !== undefined) tc.toolInput = a.toolInput;
      if (a.confirmed) Object.assign(tc, { status: "running", confirmed: a.confirmed });
      else Object.assign(tc, { status: "pending-confirmation", options: a.options, confirmationTitle: a.confirmationTitle });
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
      if (!tc || (tc.status !== "running" && tc.status !== "pending-confirmation")) return;
      Object.assign(tc, a.result as Json, { status: a.requiresResultConfirmation ? "pending-result-confirmation" : "completed" });
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
      if (existing) existing.request = req;
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
        p.kind === "toolCall" && OPEN_TOOL.has(p.toolCall!.status as string) ? { ...p, toolCall: { ...p.toolCall, status: "cancelled", reason: "skipped" } } : p,
      );
      if (a.type === "chat/error") parts.push({ kind: "error", error: a.error as Part["error"] });
      const state = a.type === "chat/turnComplete" ? "complete" : a.type === "chat/turnCancelled" ? "cancelled" : "error";
      // A new object: completed turns are immutable from here on.
      c.turns = [...c.turns, { ...t, responseParts: parts, duration: a.duration as number, state }];
      c.activeTurn = undefined;
      return;
    }
    case "chat/turnsLoaded": {
      const have = new Set(c.turns.map((x) => x.id));
      c.turns = [...(a.turns as Turn[]).filter((x) => !have.has(x.id)), ...c.turns];
      c.turnsNextCursor = typeof a.turnsNextCursor === "string" ? a.turnsNextCursor : undefined;
      return;
    }
  }
}
