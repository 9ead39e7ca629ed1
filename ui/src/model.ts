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
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";

export type { Chat, Part, Pending, SessionState, Turn } from "../../src/client/ahp/reducer.js";

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

/**
 * A session's status bits for its badges: `own` (its summary's status, or its open chat's) with the status of every
 * chat the page knows of (`state`, once the session was opened): the daemon's session status combines its chats too,
 * but the chat states the page holds may be newer than the last summary it sent.
 */
export function sessionBits(own: number, state: SessionState | undefined): number {
  let bits = own;
  for (const c of state?.chats ?? []) bits |= c.status ?? 0;
  return bits;
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

  /** A subscribed channel that no longer exists (found on reconnecting): a session goes as if removed live. */
  channelGone(uri: string): void {
    if (uri.startsWith("ahp-session:")) return this.rootNotification("root/sessionRemoved", { session: uri });
    this.chats.delete(uri);
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
    if (s) this.sessionStates.set(uri, reduceSession(s, a));
  }
}

