/**
 * The one authoritative host state shared by the backend side and the AHP side:
 * sessions and chats (reduced AHP state), the host-wide serverSeq and bounded replay log,
 * subscriptions, provider routes, creation reservations and backend command correlation.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { HostStore, SessionRow } from "./store.js";
import type { BackendEvent, HistoryTurn, NeutralInputRequest } from "./backend-schema.js";
import { ROOT } from "./ahp-schema.js";
import { wsTextFrame } from "../../transport/host-wsframe.js";

export const STATUS = { Idle: 1, Error: 2, InProgress: 8, InputNeeded: 24 } as const;
export const REPLAY_LIMIT = 10_000;
export const COMMAND_DEADLINE_MS = 60_000;

type Json = Record<string, unknown>;
export interface Origin {
  clientId: string;
  clientSeq: number;
}

export interface TurnModel {
  id: string;
  startedAt: string;
  startedMono: number;
  message: Json;
  responseParts: Json[];
  usage?: Json;
}

export interface ChatModel {
  uri: string;
  sessionUri: string;
  title: string;
  modifiedAt: string;
  turns: Json[];
  nextCursor?: string;
  activeTurn?: TurnModel;
  interactivity?: string;
  lastError: boolean;
  inputs: Map<string, Json>; // requestId -> ChatInputRequest
  inputTurns: Map<string, string>; // requestId -> bound turn
  partSeq: number;
}

/** What the backend side provides for a session's live route. */
export interface SessionRoute {
  logicalId: string;
  version: number;
  instanceId: string;
  inputCapable: boolean;
  multiplexed: boolean;
  /** Deliver a command frame; false means it was not sent (queue refusal). */
  deliver(frame: Json): boolean;
  /** Close the route because the session was disposed. */
  dispose(): void;
}

export interface ProviderRoute {
  connectionId: string;
  instanceId: string;
  version: number;
  providers: Array<{ id: string; displayName: string; description: string }>;
  ready: boolean | null;
  readyAt: number | null; // monotonic ms
  source?: { serviceId: string; instanceId: string };
  deliver(frame: Json): boolean;
}

export interface SessionModel {
  uri: string;
  sourceId: string;
  provider: string;
  providerRoute: boolean;
  title: string;
  createdAt: string;
  modifiedAt: string;
  continuity: string;
  lifecycle: "creating" | "ready" | "failed";
  creationError?: Json;
  primaryChat: string;
  chats: Map<string, ChatModel>;
  activeClients: Json[];
  inputNeeded: Map<string, Json>;
  inputAvailable: boolean;
  extra: Json;
  route?: SessionRoute;
  lastStatus: number;
}

export type CommandOutcome = { kind: "accepted" } | { kind: "rejected"; error: string } | { kind: "indeterminate"; error: string };

interface PendingCommand {
  commandId: string;
  route: SessionRoute | ProviderRoute;
  onOutcome: (o: CommandOutcome) => void;
  timer: NodeJS.Timeout;
}

export interface Subscriber {
  clientId: string;
  /** Send one pre-serialized JSON-RPC message. */
  sendRaw(text: string): void;
  /** Send one message already framed as a WebSocket text frame (same content as `text`). */
  sendFrame?(frame: Buffer, text: string): void;
  /** Whether this client may see the action type (negotiated-version filter). */
  accepts(actionType: string): boolean;
}

export interface Envelope {
  channel: string;
  action: Json;
  serverSeq: number;
  origin?: Origin;
  rejectionReason?: string;
}

let isoAt = 0;
let isoText = "";
function nowIso(): string {
  const t = Date.now();
  if (t !== isoAt) {
    isoAt = t;
    isoText = new Date(t).toISOString();
  }
  return isoText;
}
function b64(buf: Buffer): string {
  return buf.toString("base64url");
}
export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

export class HostState {
  readonly hostId: string;
  serverSeq = 0;
  readonly sessions = new Map<string, SessionModel>();
  readonly chatIndex = new Map<string, ChatModel>();
  readonly sourceIndex = new Map<string, string>(); // sourceId -> session uri
  readonly aliasIndex = new Map<string, string>(); // alias -> session uri
  readonly creations = new Map<string, { provider: string; tokenHash: string }>();
  readonly providers = new Map<string, ProviderRoute>(); // provider id -> route
  readonly pending = new Map<string, PendingCommand>();
  private replay: Envelope[] = [];
  private replayStart = 0; // index of the oldest retained entry (ring)
  readonly subs = new Map<string, Set<Subscriber>>();
  readonly log: (msg: string) => void;

  constructor(
    readonly store: HostStore,
    log: (msg: string) => void,
  ) {
    this.log = log;
    this.hostId = store.hostId();
    this.restore();
  }

  // ── URIs ──────────────────────────────────────────────────────────────────
  deriveSessionUri(sourceId: string): string {
    return "ahp-session:/" + b64(createHash("sha256").update(`${this.hostId}\0session\0${sourceId}`).digest()).slice(0, 32);
  }
  derivePrimaryChatUri(sessionUri: string): string {
    return "ahp-chat:/" + b64(createHash("sha256").update(`${this.hostId}\0chat\0${sessionUri}\0primary`).digest()).slice(0, 32);
  }

  // ── Restore ───────────────────────────────────────────────────────────────
  private restore(): void {
    for (const row of this.store.loadSessions()) {
      const s = this.newSession(row);
      this.sessions.set(s.uri, s);
      this.sourceIndex.set(s.sourceId, s.uri);
    }
    for (const c of this.store.loadChats()) {
      const s = this.sessions.get(c.sessionUri);
      if (!s) continue;
      const chat = this.ensureChat(s, c.uri, c.title);
      chat.turns = JSON.parse(c.turns) as Json[];
      if (c.nextCursor) chat.nextCursor = c.nextCursor;
    }
    for (const a of this.store.loadAliases()) if (this.sessions.has(a.sessionUri)) this.aliasIndex.set(a.alias, a.sessionUri);
    for (const c of this.store.loadCreations()) this.creations.set(c.sessionUri, { provider: c.provider, tokenHash: c.tokenHash });
  }

  private newSession(row: SessionRow): SessionModel {
    const extra = JSON.parse(row.extra) as Json;
    const s: SessionModel = {
      uri: row.uri,
      sourceId: row.sourceId,
      provider: row.provider,
      providerRoute: row.providerRoute === 1,
      title: row.title,
      createdAt: row.createdAt,
      modifiedAt: row.modifiedAt,
      continuity: row.continuity,
      lifecycle: row.lifecycle as SessionModel["lifecycle"],
      primaryChat: row.chatUri,
      chats: new Map(),
      activeClients: [],
      inputNeeded: new Map(),
      inputAvailable: true,
      extra,
      lastStatus: STATUS.Idle,
    };
    if (extra.creationError) s.creationError = extra.creationError as Json;
    this.ensureChat(s, row.chatUri, row.title);
    return s;
  }

  private ensureChat(s: SessionModel, uri: string, title: string): ChatModel {
    let c = s.chats.get(uri);
    if (!c) {
      c = { uri, sessionUri: s.uri, title, modifiedAt: s.modifiedAt, turns: [], lastError: false, inputs: new Map(), inputTurns: new Map(), partSeq: 0 };
      s.chats.set(uri, c);
      this.chatIndex.set(uri, c);
    }
    return c;
  }

  persistSession(s: SessionModel): void {
    const extra: Json = { ...s.extra };
    if (s.creationError) extra.creationError = s.creationError;
    this.store.putSession({
      uri: s.uri,
      sourceId: s.sourceId,
      provider: s.provider,
      providerRoute: s.providerRoute ? 1 : 0,
      title: s.title,
      createdAt: s.createdAt,
      modifiedAt: s.modifiedAt,
      continuity: s.continuity,
      chatUri: s.primaryChat,
      lifecycle: s.lifecycle,
      extra: JSON.stringify(extra),
    });
  }
  persistChat(c: ChatModel): void {
    this.store.putChat({ uri: c.uri, sessionUri: c.sessionUri, title: c.title, turns: JSON.stringify(c.turns), nextCursor: c.nextCursor ?? null });
  }

  // ── Registration (backend side) ───────────────────────────────────────────
  /** Resolve which existing session (if any) a source and its aliases name; throws on conflicts. */
  resolveSource(sourceId: string, aliases: string[]): string | undefined {
    const direct = this.sourceIndex.get(sourceId) ?? this.aliasIndex.get(sourceId);
    let found = direct;
    for (const a of aliases) {
      const u = this.sourceIndex.get(a) ?? this.aliasIndex.get(a);
      if (u === undefined) continue;
      if (found !== undefined && u !== found) throw new Error(`alias ${JSON.stringify(a)} resolves to a different session`);
      found = u;
    }
    return found;
  }

  /** Create or adopt a session for a registration. Returns the session and whether it was new. */
  registerSession(opts: {
    sourceId: string;
    aliases: string[];
    provider: string;
    title?: string;
    requestedSession?: string;
    providerRoute: boolean;
    model?: unknown;
    thinkingLevel?: string;
    interactivity?: string;
    cwd?: string;
    history?: HistoryTurn[];
    historyNextCursor?: string;
  }): { session: SessionModel; created: boolean } {
    let uri = opts.requestedSession ?? this.resolveSource(opts.sourceId, opts.aliases);
    let s = uri ? this.sessions.get(uri) : undefined;
    let created = false;
    const now = nowIso();
    if (!s) {
      uri = uri ?? this.deriveSessionUri(opts.sourceId);
      const row: SessionRow = {
        uri,
        sourceId: opts.sourceId,
        provider: opts.provider,
        providerRoute: opts.providerRoute ? 1 : 0,
        title: opts.title ?? "Session",
        createdAt: now,
        modifiedAt: now,
        continuity: randomUUID(),
        chatUri: this.derivePrimaryChatUri(uri),
        lifecycle: "ready",
        extra: "{}",
      };
      s = this.newSession(row);
      this.sessions.set(uri, s);
      created = true;
    } else if (s.sourceId !== opts.sourceId) {
      // Adoption through an alias (or a claimed creation): the old canonical source becomes an alias.
      this.sourceIndex.delete(s.sourceId);
      if (s.sourceId && !s.sourceId.startsWith("\0")) {
        this.aliasIndex.set(s.sourceId, s.uri);
        this.store.putAlias(s.sourceId, s.uri);
      }
      s.sourceId = opts.sourceId;
    }
    this.sourceIndex.set(opts.sourceId, s.uri);
    for (const a of opts.aliases) {
      if (a === opts.sourceId) continue;
      this.aliasIndex.set(a, s.uri);
      this.store.putAlias(a, s.uri);
    }
    if (opts.title && opts.title !== s.title && !created) this.setTitle(s, opts.title, undefined);
    if (opts.model !== undefined) s.extra.model = opts.model;
    if (opts.thinkingLevel !== undefined) s.extra.thinkingLevel = opts.thinkingLevel;
    const chat = this.chatIndex.get(s.primaryChat)!;
    if (opts.interactivity) chat.interactivity = opts.interactivity;
    if (opts.history && opts.history.length > 0) this.mergeHistory(chat, opts.history, opts.historyNextCursor);
    this.persistSession(s);
    if (created) {
      this.persistChat(chat);
      this.rootNotify("root/sessionAdded", { channel: ROOT, summary: this.summary(s) });
    }
    return { session: s, created };
  }

  private historyToTurn(h: HistoryTurn): Json {
    const parts: Json[] = [];
    if (h.reasoningText) parts.push({ kind: "reasoning", id: `${h.id}-r`, content: h.reasoningText });
    if (h.responseText) parts.push({ kind: "markdown", id: `${h.id}-m`, content: h.responseText });
    const t: Json = { id: h.id, message: { text: h.userText, origin: { kind: "user" } }, responseParts: parts, state: h.cancelled ? "cancelled" : "complete" };
    if (h.startedAt && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(h.startedAt)) t.startedAt = h.startedAt;
    return t;
  }

  /** Append backend history turns not already held (by id), in order. */
  private mergeHistory(chat: ChatModel, history: HistoryTurn[], cursor?: string): void {
    const have = new Set(chat.turns.map((t) => t.id as string));
    let added = false;
    for (const h of history) {
      if (have.has(h.id)) continue;
      chat.turns.push(this.historyToTurn(h));
      added = true;
    }
    if (cursor !== undefined && chat.turns.length === history.length) chat.nextCursor = cursor;
    if (added) this.persistChat(chat);
  }

  sourceCursor(s: SessionModel): string | undefined {
    const chat = this.chatIndex.get(s.primaryChat);
    const last = chat?.turns[chat.turns.length - 1];
    return last ? (last.id as string) : undefined;
  }

  // ── Creation reservations ─────────────────────────────────────────────────
  reserveCreation(sessionUri: string, provider: string): string {
    const token = randomBytes(32).toString("base64url");
    const tokenHash = hashToken(token);
    this.store.reserveCreation({ sessionUri, provider, tokenHash, createdAt: nowIso() });
    this.creations.set(sessionUri, { provider, tokenHash });
    return token;
  }
  dropCreation(sessionUri: string): void {
    this.creations.delete(sessionUri);
    this.store.dropCreation(sessionUri);
  }
  /** Check a creation claim in constant time. */
  checkClaim(sessionUri: string, token: string, provider: string): "ok" | "unknown" | "mismatch" {
    const c = this.creations.get(sessionUri);
    if (!c) return "unknown";
    const ok = sameHash(c.tokenHash, hashToken(token));
    if (!ok || c.provider !== provider) return "mismatch";
    return "ok";
  }

  /** A client-created session enters `creating` once the provider admitted the launch. */
  addCreatingSession(uri: string, provider: string, workingDirectories?: string[]): SessionModel {
    const now = nowIso();
    const s = this.newSession({
      uri,
      sourceId: `\0pending:${uri}`,
      provider,
      providerRoute: 1,
      title: "New Session",
      createdAt: now,
      modifiedAt: now,
      continuity: randomUUID(),
      chatUri: this.derivePrimaryChatUri(uri),
      lifecycle: "creating",
      extra: JSON.stringify(workingDirectories ? { workingDirectories } : {}),
    });
    this.sessions.set(uri, s);
    this.persistSession(s);
    this.persistChat(this.chatIndex.get(s.primaryChat)!);
    this.rootNotify("root/sessionAdded", { channel: ROOT, summary: this.summary(s) });
    this.publishRootCount();
    return s;
  }

  markReady(s: SessionModel): void {
    if (s.lifecycle === "ready") return;
    s.lifecycle = "ready";
    this.persistSession(s);
    this.publish(s.uri, { type: "session/ready" });
  }
  markCreationFailed(s: SessionModel, message: string): void {
    s.lifecycle = "failed";
    s.creationError = { errorType: "creation_failed", message };
    this.persistSession(s);
    this.publish(s.uri, { type: "session/creationFailed", error: s.creationError });
    this.summaryChanged(s);
  }

  removeSession(uri: string): void {
    const s = this.sessions.get(uri);
    if (!s) return;
    this.sessions.delete(uri);
    if (this.sourceIndex.get(s.sourceId) === uri) this.sourceIndex.delete(s.sourceId);
    for (const [a, u] of this.aliasIndex) if (u === uri) this.aliasIndex.delete(a);
    for (const c of s.chats.keys()) {
      this.chatIndex.delete(c);
      this.subs.delete(c);
    }
    this.subs.delete(uri);
    this.creations.delete(uri);
    this.store.removeSession(uri);
    this.rootNotify("root/sessionRemoved", { channel: ROOT, session: uri });
    this.publishRootCount();
  }

  // ── Publication ───────────────────────────────────────────────────────────
  /** Sequence, reduce, record and fan out one action. */
  publish(channel: string, action: Json, origin?: Origin, rejectionReason?: string): Envelope {
    const env: Envelope = { channel, action, serverSeq: ++this.serverSeq };
    if (origin) env.origin = origin;
    if (rejectionReason !== undefined) env.rejectionReason = rejectionReason;
    else this.reduce(channel, action);
    if (this.replay.length < REPLAY_LIMIT) this.replay.push(env);
    else {
      this.replay[this.replayStart] = env;
      this.replayStart = (this.replayStart + 1) % REPLAY_LIMIT;
    }
    const set = this.subs.get(channel);
    if (set && set.size > 0) {
      const text = `{"jsonrpc":"2.0","method":"action","params":${JSON.stringify(env)}}`;
      const type = action.type as string;
      let frame: Buffer | undefined;
      for (const sub of set) {
        if (!sub.accepts(type)) continue;
        if (sub.sendFrame) sub.sendFrame((frame ??= wsTextFrame(text)), text);
        else sub.sendRaw(text);
      }
    }
    return env;
  }

  rootNotify(method: string, params: Json): void {
    const set = this.subs.get(ROOT);
    if (!set || set.size === 0) return;
    const text = JSON.stringify({ jsonrpc: "2.0", method, params });
    for (const sub of set) sub.sendRaw(text);
  }

  /** Replay envelopes after `since` for the given channels, or null when the gap is too old. */
  replaySince(since: number, channels: Set<string>): Envelope[] | null {
    const n = this.replay.length;
    if (since >= this.serverSeq) return [];
    const oldest = n === 0 ? this.serverSeq + 1 : this.replay[this.replayStart]!.serverSeq;
    if (since + 1 < oldest) return null;
    const out: Envelope[] = [];
    for (let i = 0; i < n; i++) {
      const e = this.replay[(this.replayStart + i) % n]!;
      if (e.serverSeq > since && channels.has(e.channel)) out.push(e);
    }
    return out;
  }

  subscribe(channel: string, sub: Subscriber): void {
    let set = this.subs.get(channel);
    if (!set) this.subs.set(channel, (set = new Set()));
    set.add(sub);
  }
  unsubscribe(channel: string, sub: Subscriber): void {
    const set = this.subs.get(channel);
    if (set) {
      set.delete(sub);
      if (set.size === 0) this.subs.delete(channel);
    }
  }

  // ── Snapshots ─────────────────────────────────────────────────────────────
  channelExists(uri: string): boolean {
    return uri === ROOT || this.sessions.has(uri) || this.chatIndex.has(uri);
  }
  snapshot(uri: string): Json | undefined {
    if (uri === ROOT) return { resource: ROOT, state: this.rootState(), fromSeq: this.serverSeq };
    const s = this.sessions.get(uri);
    if (s) return { resource: uri, state: this.sessionState(s), fromSeq: this.serverSeq };
    const c = this.chatIndex.get(uri);
    if (c) return { resource: uri, state: this.chatState(c), fromSeq: this.serverSeq };
    return undefined;
  }
  agents(): Json[] {
    const seen = new Map<string, Json>();
    for (const p of this.providers.values())
      for (const info of p.providers)
        if (!seen.has(info.id)) seen.set(info.id, { provider: info.id, displayName: info.displayName, description: info.description, models: [] });
    return [...seen.values()].sort((a, b) => String(a.provider).localeCompare(String(b.provider)));
  }
  rootState(): Json {
    return { agents: this.agents(), activeSessions: this.sessions.size };
  }
  publishAgents(): void {
    this.publish(ROOT, { type: "root/agentsChanged", agents: this.agents() });
  }
  publishRootCount(): void {
    this.publish(ROOT, { type: "root/activeSessionsChanged", activeSessions: this.sessions.size });
  }

  chatStatus(c: ChatModel): number {
    if (c.activeTurn) {
      for (const r of c.activeTurn.responseParts) {
        if (r.kind === "inputRequest" && r.response === undefined) return STATUS.InputNeeded;
        if (r.kind === "toolCall") {
          const st = (r.toolCall as Json).status;
          if (st === "pending-confirmation" || st === "pending-result-confirmation") return STATUS.InputNeeded;
        }
      }
      return c.inputs.size > 0 ? STATUS.InputNeeded : STATUS.InProgress;
    }
    if (c.inputs.size > 0) return STATUS.InputNeeded;
    return c.lastError ? STATUS.Error : STATUS.Idle;
  }
  sessionStatus(s: SessionModel): number {
    const primary = this.chatIndex.get(s.primaryChat);
    let st = primary ? this.chatStatus(primary) : STATUS.Idle;
    if (s.inputNeeded.size > 0) st |= STATUS.InputNeeded;
    for (const c of s.chats.values()) {
      const cs = this.chatStatus(c);
      if ((cs & STATUS.InputNeeded) === STATUS.InputNeeded) st |= STATUS.InputNeeded;
    }
    if (s.lifecycle === "failed") st = STATUS.Error;
    return st;
  }
  chatSummary(c: ChatModel): Json {
    const out: Json = { resource: c.uri, title: c.title, status: this.chatStatus(c), modifiedAt: c.modifiedAt };
    if (c.interactivity) out.interactivity = c.interactivity;
    return out;
  }
  chatState(c: ChatModel): Json {
    const out: Json = { ...this.chatSummary(c), turns: c.turns };
    if (c.nextCursor) out.turnsNextCursor = c.nextCursor;
    if (c.activeTurn) {
      const t = c.activeTurn;
      const at: Json = { id: t.id, startedAt: t.startedAt, message: t.message, responseParts: t.responseParts };
      if (t.usage) at.usage = t.usage;
      out.activeTurn = at;
    }
    return out;
  }
  sessionState(s: SessionModel): Json {
    const out: Json = {
      provider: s.provider,
      title: s.title,
      status: this.sessionStatus(s),
      lifecycle: s.lifecycle,
      activeClients: s.activeClients,
      chats: [...s.chats.values()].map((c) => this.chatSummary(c)),
      defaultChat: s.primaryChat,
    };
    if (s.creationError) out.creationError = s.creationError;
    if (Array.isArray(s.extra.workingDirectories)) out.workingDirectories = s.extra.workingDirectories;
    if (s.inputNeeded.size > 0) out.inputNeeded = [...s.inputNeeded.values()];
    const meta: Json = {};
    if (!s.inputAvailable) meta["berth.inputAvailable"] = false;
    if (s.extra.model) meta["berth.model"] = s.extra.model;
    if (Object.keys(meta).length) out._meta = meta;
    return out;
  }
  summary(s: SessionModel): Json {
    const out: Json = {
      resource: s.uri,
      provider: s.provider,
      title: s.title,
      status: this.sessionStatus(s),
      createdAt: s.createdAt,
      modifiedAt: s.modifiedAt,
      defaultChat: s.primaryChat,
      chats: [...s.chats.values()].map((c) => {
        const o: Json = { resource: c.uri, title: c.title };
        if (c.interactivity) o.interactivity = c.interactivity;
        return o;
      }),
    };
    if (Array.isArray(s.extra.workingDirectories)) out.workingDirectories = s.extra.workingDirectories;
    return out;
  }
  /** Emit root/sessionSummaryChanged when status changed (title is sent by setTitle). */
  summaryChanged(s: SessionModel, force = false): void {
    const st = this.sessionStatus(s);
    if (!force && st === s.lastStatus) return;
    s.lastStatus = st;
    s.modifiedAt = nowIso();
    this.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { status: st, modifiedAt: s.modifiedAt } });
  }
  setTitle(s: SessionModel, title: string, origin: Origin | undefined): void {
    this.publish(s.uri, { type: "session/titleChanged", title }, origin);
    this.persistSession(s);
    this.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { title, modifiedAt: s.modifiedAt } });
  }

  // ── Reducer ───────────────────────────────────────────────────────────────
  private reduce(channel: string, a: Json): void {
    const type = a.type as string;
    if (channel === ROOT) return;
    const s = this.sessions.get(channel);
    if (s) {
      if (type === "session/titleChanged") {
        s.title = a.title as string;
        s.modifiedAt = nowIso();
      } else if (type === "session/inputNeededSet") {
        const r = a.request as Json;
        s.inputNeeded.set(r.id as string, r);
      } else if (type === "session/inputNeededRemoved") s.inputNeeded.delete(a.id as string);
      else if (type === "session/chatAdded") {
        const sum = a.summary as Json;
        this.ensureChat(s, sum.resource as string, sum.title as string);
      } else if (type === "session/chatRemoved") {
        s.chats.delete(a.chat as string);
        this.chatIndex.delete(a.chat as string);
      }
      return;
    }
    const c = this.chatIndex.get(channel);
    if (!c) return;
    c.modifiedAt = nowIso();
    const t = c.activeTurn;
    switch (type) {
      case "chat/turnStarted":
        c.activeTurn = { id: a.turnId as string, startedAt: a.startedAt as string, startedMono: performance.now(), message: a.message as Json, responseParts: [] };
        c.lastError = false;
        break;
      case "chat/responsePart":
        if (t && t.id === a.turnId) t.responseParts.push(a.part as Json);
        break;
      case "chat/delta":
      case "chat/reasoning": {
        if (!t || t.id !== a.turnId) break;
        const p = findPart(t, a.partId as string);
        if (p) p.content = (p.content as string) + (a.content as string);
        break;
      }
      case "chat/toolCallStart":
        if (t && t.id === a.turnId)
          t.responseParts.push({
            kind: "toolCall",
            toolCall: { toolCallId: a.toolCallId, toolName: a.toolName, displayName: a.displayName, status: "streaming" },
          });
        break;
      case "chat/toolCallReady": {
        const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
        if (!tc) break;
        if (tc.status !== "streaming" && tc.status !== "running") break;
        tc.invocationMessage = a.invocationMessage;
        if (a.toolInput !== undefined) tc.toolInput = a.toolInput;
        if (a.confirmed) {
          tc.status = "running";
          tc.confirmed = a.confirmed;
        } else {
          tc.status = "pending-confirmation";
          delete tc.confirmed;
          if (a.confirmationTitle !== undefined) tc.confirmationTitle = a.confirmationTitle;
          if (a.editable !== undefined) tc.editable = a.editable;
          if (a.options !== undefined) tc.options = a.options;
        }
        break;
      }
      case "chat/toolCallConfirmed": {
        const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
        if (!tc || tc.status !== "pending-confirmation") break;
        delete tc.confirmationTitle;
        delete tc.editable;
        delete tc.options;
        if (a.approved) {
          tc.status = "running";
          tc.confirmed = a.confirmed ?? "user-action";
          if (typeof a.editedToolInput === "string") tc.toolInput = a.editedToolInput;
        } else {
          tc.status = "cancelled";
          tc.reason = a.reason ?? "denied";
          if (a.reasonMessage !== undefined) tc.reasonMessage = a.reasonMessage;
        }
        break;
      }
      case "chat/toolCallComplete": {
        const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
        if (!tc || (tc.status !== "running" && tc.status !== "pending-confirmation")) break;
        const r = a.result as Json;
        tc.status = a.requiresResultConfirmation ? "pending-result-confirmation" : "completed";
        if (!tc.confirmed) tc.confirmed = "not-needed";
        if (!tc.invocationMessage) tc.invocationMessage = tc.displayName;
        delete tc.confirmationTitle;
        delete tc.editable;
        delete tc.options;
        Object.assign(tc, r);
        break;
      }
      case "chat/toolCallResultConfirmed": {
        const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
        if (!tc || tc.status !== "pending-result-confirmation") break;
        if (a.approved) tc.status = "completed";
        else {
          const keep = { toolCallId: tc.toolCallId, toolName: tc.toolName, displayName: tc.displayName, invocationMessage: tc.invocationMessage };
          for (const k of Object.keys(tc)) delete tc[k];
          Object.assign(tc, keep, { status: "cancelled", reason: "result-denied" });
        }
        break;
      }
      case "chat/usage":
        if (t && t.id === a.turnId) t.usage = a.usage as Json;
        break;
      case "chat/inputRequested": {
        const req = a.request as Json;
        c.inputs.set(req.id as string, req);
        if (t) {
          const existing = t.responseParts.find((p) => p.kind === "inputRequest" && (p.request as Json).id === req.id && p.response === undefined);
          if (existing) existing.request = req;
          else t.responseParts.push({ kind: "inputRequest", request: req });
        }
        break;
      }
      case "chat/inputCompleted": {
        c.inputs.delete(a.requestId as string);
        c.inputTurns.delete(a.requestId as string);
        const parts = t ? t.responseParts : [];
        const p = parts.find((x) => x.kind === "inputRequest" && (x.request as Json).id === a.requestId);
        if (p) {
          p.response = a.response;
          if (a.answers) (p.request as Json).answers = a.answers;
        }
        break;
      }
      case "chat/turnComplete":
      case "chat/turnCancelled":
      case "chat/error": {
        if (!t || t.id !== a.turnId) break;
        const parts = t.responseParts.slice();
        for (const p of parts) {
          if (p.kind !== "toolCall") continue;
          const tc = p.toolCall as Json;
          if (tc.status === "streaming" || tc.status === "pending-confirmation" || tc.status === "running" || tc.status === "pending-result-confirmation") {
            const keep = { toolCallId: tc.toolCallId, toolName: tc.toolName, displayName: tc.displayName, invocationMessage: tc.invocationMessage ?? tc.displayName };
            p.toolCall = { ...keep, status: "cancelled", reason: "skipped" };
          }
        }
        if (type === "chat/error") parts.push({ kind: "error", error: a.error });
        const done: Json = {
          id: t.id,
          startedAt: t.startedAt,
          duration: a.duration,
          message: t.message,
          responseParts: parts,
          state: type === "chat/turnComplete" ? "complete" : type === "chat/turnCancelled" ? "cancelled" : "error",
        };
        if (t.usage) done.usage = t.usage;
        c.turns.push(done);
        c.activeTurn = undefined;
        c.lastError = type === "chat/error";
        for (const [id, turn] of c.inputTurns) if (turn === t.id) {
          c.inputs.delete(id);
          c.inputTurns.delete(id);
        }
        this.persistChat(c);
        break;
      }
      case "chat/turnsLoaded": {
        const turns = a.turns as Json[];
        const have = new Set(c.turns.map((x) => x.id));
        c.turns = [...turns.filter((x) => !have.has(x.id)), ...c.turns];
        if (a.turnsNextCursor) c.nextCursor = a.turnsNextCursor as string;
        else delete c.nextCursor;
        this.persistChat(c);
        break;
      }
    }
  }

  // ── Backend events → AHP actions ──────────────────────────────────────────
  /**
   * Reduce one validated backend event into AHP state. Returns null on success, or a
   * semantic-rejection message (nothing was published in that case).
   */
  applyEvent(s: SessionModel, chat: ChatModel, ev: BackendEvent): string | null {
    const t = chat.activeTurn;
    const needTurn = () => (t ? null : `${ev.type} without an active turn`);
    const startTurn = (text: string, turnId?: string, kind = "user") => {
      this.publish(chat.uri, {
        type: "chat/turnStarted",
        turnId: turnId ?? randomUUID(),
        startedAt: nowIso(),
        message: { text, origin: { kind } },
      });
    };
    switch (ev.type) {
      case "user_message":
        if (t) return null; // echo of a client-started (or already running) turn
        startTurn(ev.text, ev.turnId);
        break;
      case "agent_started":
        if (!t) startTurn("", ev.turnId, "agent");
        break;
      case "text_delta":
      case "thinking_delta": {
        const err = needTurn();
        if (err) return err;
        const kind = ev.type === "text_delta" ? "markdown" : "reasoning";
        const last = t!.responseParts[t!.responseParts.length - 1];
        if (last && last.kind === kind)
          this.publish(chat.uri, { type: kind === "markdown" ? "chat/delta" : "chat/reasoning", turnId: t!.id, partId: last.id, content: ev.text });
        else this.publish(chat.uri, { type: "chat/responsePart", turnId: t!.id, part: { kind, id: `p${++chat.partSeq}`, content: ev.text } });
        break;
      }
      case "tool_started": {
        const err = needTurn();
        if (err) return err;
        if (findTool(t!, ev.toolCallId)) return `duplicate toolCallId ${ev.toolCallId}`;
        this.publish(chat.uri, { type: "chat/toolCallStart", turnId: t!.id, toolCallId: ev.toolCallId, toolName: ev.toolName, displayName: ev.toolName });
        const ready: Json = { type: "chat/toolCallReady", turnId: t!.id, toolCallId: ev.toolCallId, invocationMessage: ev.toolName, confirmed: "not-needed" };
        if (ev.input !== undefined) ready.toolInput = ev.input;
        this.publish(chat.uri, ready);
        break;
      }
      case "tool_confirmation_requested": {
        const err = needTurn();
        if (err) return err;
        if (!findTool(t!, ev.toolCallId)) {
          if (!ev.toolName) return `unknown toolCallId ${ev.toolCallId}`;
          this.publish(chat.uri, { type: "chat/toolCallStart", turnId: t!.id, toolCallId: ev.toolCallId, toolName: ev.toolName, displayName: ev.toolName });
        }
        const tc = findTool(t!, ev.toolCallId)!;
        const ready: Json = { type: "chat/toolCallReady", turnId: t!.id, toolCallId: ev.toolCallId, invocationMessage: ev.message ?? (tc.displayName as string) };
        if (ev.input !== undefined) ready.toolInput = ev.input;
        if (ev.title !== undefined) ready.confirmationTitle = ev.title;
        if (ev.editable !== undefined) ready.editable = ev.editable;
        if (ev.options !== undefined) ready.options = ev.options;
        this.publish(chat.uri, ready);
        this.publish(s.uri, {
          type: "session/inputNeededSet",
          request: { id: `tool:${ev.toolCallId}`, chat: chat.uri, kind: "toolConfirmation", turnId: t!.id, toolCall: { ...findTool(t!, ev.toolCallId)! } },
        });
        break;
      }
      case "tool_confirmation_resolved": {
        const err = needTurn();
        if (err) return err;
        const tc = findTool(t!, ev.toolCallId);
        if (!tc) return `unknown toolCallId ${ev.toolCallId}`;
        if (tc.status === "pending-confirmation") {
          const act: Json = ev.approved
            ? { type: "chat/toolCallConfirmed", turnId: t!.id, toolCallId: ev.toolCallId, approved: true, confirmed: "user-action" }
            : { type: "chat/toolCallConfirmed", turnId: t!.id, toolCallId: ev.toolCallId, approved: false, reason: "denied" };
          if (ev.selectedOptionId) act.selectedOptionId = ev.selectedOptionId;
          this.publish(chat.uri, act);
        }
        if (s.inputNeeded.has(`tool:${ev.toolCallId}`)) this.publish(s.uri, { type: "session/inputNeededRemoved", id: `tool:${ev.toolCallId}` });
        break;
      }
      case "tool_completed":
      case "tool_result_confirmation_requested": {
        const err = needTurn();
        if (err) return err;
        const tc = findTool(t!, ev.toolCallId);
        if (!tc) return `unknown toolCallId ${ev.toolCallId}`;
        const isError = ev.isError === true;
        const act: Json = {
          type: "chat/toolCallComplete",
          turnId: t!.id,
          toolCallId: ev.toolCallId,
          result: { success: !isError, pastTenseMessage: `${tc.displayName as string} ${isError ? "failed" : "finished"}`, content: [{ type: "text", text: ev.output }] },
        };
        if (ev.type === "tool_result_confirmation_requested") act.requiresResultConfirmation = true;
        this.publish(chat.uri, act);
        if (s.inputNeeded.has(`tool:${ev.toolCallId}`)) this.publish(s.uri, { type: "session/inputNeededRemoved", id: `tool:${ev.toolCallId}` });
        break;
      }
      case "tool_result_confirmation_resolved": {
        const err = needTurn();
        if (err) return err;
        const tc = findTool(t!, ev.toolCallId);
        if (!tc) return `unknown toolCallId ${ev.toolCallId}`;
        if (tc.status === "pending-result-confirmation")
          this.publish(chat.uri, { type: "chat/toolCallResultConfirmed", turnId: t!.id, toolCallId: ev.toolCallId, approved: ev.approved });
        break;
      }
      case "config_changed":
        if (ev.model) s.extra.model = ev.model;
        if (ev.thinkingLevel) s.extra.thinkingLevel = ev.thinkingLevel;
        this.persistSession(s);
        break;
      case "usage": {
        if (!t) return null;
        const u: Json = {};
        if (ev.inputTokens !== undefined) u.inputTokens = ev.inputTokens;
        if (ev.outputTokens !== undefined) u.outputTokens = ev.outputTokens;
        if (ev.cacheReadTokens !== undefined) u.cacheReadTokens = ev.cacheReadTokens;
        if (ev.model !== undefined) u.model = ev.model;
        this.publish(chat.uri, { type: "chat/usage", turnId: t.id, usage: u });
        break;
      }
      case "settled": {
        if (!t) return null; // already settled (e.g. cancelled by a client)
        const duration = Math.max(0, Math.round(performance.now() - t.startedMono));
        if (ev.error) this.publish(chat.uri, { type: "chat/error", turnId: t.id, duration, error: { errorType: "backend_error", message: ev.error } });
        else if (ev.cancelled) this.publish(chat.uri, { type: "chat/turnCancelled", turnId: t.id, duration });
        else this.publish(chat.uri, { type: "chat/turnComplete", turnId: t.id, duration });
        break;
      }
      case "title_changed":
        this.setTitle(s, ev.title, undefined);
        break;
      case "input_requested":
      case "input_updated": {
        const r = ev.request;
        if (r.turnId !== undefined && (!t || t.id !== r.turnId)) return `input request ${r.id} targets a turn that is not active`;
        if (ev.type === "input_updated" && !chat.inputs.has(r.id)) return `input request ${r.id} is not pending`;
        this.postInput(s, chat, r);
        break;
      }
      case "input_snapshot": {
        s.inputAvailable = ev.available !== false;
        if (!s.inputAvailable) break; // an availability fence: retained requests are neither replaced nor resolved
        const keep = new Set(ev.requests.map((r) => r.id));
        for (const id of [...chat.inputs.keys()]) if (!keep.has(id)) this.resolveInput(s, chat, id, "cancel", undefined, undefined);
        for (const r of ev.requests) this.postInput(s, chat, r);
        break;
      }
      case "input_resolved": {
        if (!chat.inputs.has(ev.requestId)) return `input request ${ev.requestId} is not pending`;
        const origin = ev.commandId ? this.inputOrigins.get(ev.commandId) : undefined;
        if (ev.commandId) this.inputOrigins.delete(ev.commandId);
        this.resolveInput(s, chat, ev.requestId, ev.response, ev.answers as Json | undefined, origin);
        break;
      }
      case "turns_loaded": {
        this.publish(chat.uri, {
          type: "chat/turnsLoaded",
          turns: ev.turns.map((h) => this.historyToTurn(h)),
          ...(ev.nextCursor ? { turnsNextCursor: ev.nextCursor } : {}),
        });
        break;
      }
    }
    this.summaryChanged(s);
    return null;
  }

  /** commandId of a complete_input -> the client origin to echo when the runtime resolves it. */
  readonly inputOrigins = new Map<string, Origin>();

  private postInput(s: SessionModel, chat: ChatModel, r: NeutralInputRequest): void {
    const req: Json = { id: r.id };
    if (r.message !== undefined) req.message = r.message;
    if (r.url !== undefined) req.url = r.url;
    if (r.questions)
      req.questions = r.questions.map((q) => {
        const out: Json = { id: q.id, kind: mapQuestionKind(q.kind), message: q.message };
        if (q.title !== undefined) out.title = q.title;
        if (q.required !== undefined) out.required = q.required;
        if (q.options) out.options = q.options;
        if (q.allowFreeform !== undefined) out.allowFreeformInput = q.allowFreeform;
        return out;
      });
    this.publish(chat.uri, { type: "chat/inputRequested", request: req });
    if (r.turnId) chat.inputTurns.set(r.id, r.turnId);
    this.publish(s.uri, { type: "session/inputNeededSet", request: { id: `input:${chat.uri}:${r.id}`, chat: chat.uri, kind: "chatInput", request: req } });
  }
  private resolveInput(s: SessionModel, chat: ChatModel, requestId: string, response: string, answers: Json | undefined, origin: Origin | undefined): void {
    const act: Json = { type: "chat/inputCompleted", requestId, response };
    if (answers) act.answers = answers;
    this.publish(chat.uri, act, origin);
    const key = `input:${chat.uri}:${requestId}`;
    if (s.inputNeeded.has(key)) this.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
  }

  // ── Commands ──────────────────────────────────────────────────────────────
  /** Send a correlated command; the outcome callback fires exactly once. */
  sendCommand(route: SessionRoute | ProviderRoute, frame: Json, onOutcome: (o: CommandOutcome) => void): string {
    const commandId = randomUUID();
    frame.commandId = commandId;
    const timer = setTimeout(() => this.settle(commandId, { kind: "indeterminate", error: "no command_result before the deadline" }), COMMAND_DEADLINE_MS);
    timer.unref();
    this.pending.set(commandId, { commandId, route, onOutcome, timer });
    if (!route.deliver(frame)) {
      this.pending.delete(commandId);
      clearTimeout(timer);
      onOutcome({ kind: "rejected", error: "backend not connected (command not sent)" });
    }
    return commandId;
  }
  /** Settle a pending command. Returns false when the ID is unknown or from another route. */
  settle(commandId: string, o: CommandOutcome, from?: SessionRoute | ProviderRoute | ((r: SessionRoute | ProviderRoute) => boolean)): boolean {
    const p = this.pending.get(commandId);
    if (!p) return false;
    if (from !== undefined && (typeof from === "function" ? !from(p.route) : p.route !== from)) return false;
    this.pending.delete(commandId);
    clearTimeout(p.timer);
    try {
      p.onOutcome(o);
    } catch (e) {
      this.log(`command outcome handler failed: ${String(e)}`);
    }
    return true;
  }
  /** A route went away: every delivered, unsettled command on it becomes indeterminate. */
  failRoute(match: (r: SessionRoute | ProviderRoute) => boolean): void {
    for (const [id, p] of [...this.pending]) if (match(p.route)) this.settle(id, { kind: "indeterminate", error: "backend connection lost after delivery" });
  }
}

function findPart(t: TurnModel, partId: string): Json | undefined {
  for (let i = t.responseParts.length - 1; i >= 0; i--) if (t.responseParts[i]!.id === partId) return t.responseParts[i];
  return undefined;
}
export function findTool(t: TurnModel, toolCallId: string): Json | undefined {
  for (const p of t.responseParts) if (p.kind === "toolCall" && (p.toolCall as Json).toolCallId === toolCallId) return p.toolCall as Json;
  return undefined;
}
function mapQuestionKind(k: string): string {
  const m: Record<string, string> = {
    single_select: "single-select",
    multi_select: "multi-select",
    text: "text",
    number: "number",
    integer: "integer",
    boolean: "boolean",
  };
  return m[k] ?? k.replace(/_/g, "-");
}
