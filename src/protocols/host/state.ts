/**
 * The one authoritative host state shared by the backend side and the AHP side. It owns the
 * session registry (sources, aliases, chats, creation reservations, provider routes) and is the
 * facade over the action log (action-log.ts), the reducer (reducer.ts), projections
 * (projection.ts), backend-event reduction (backend-events.ts) and command correlation
 * (commands.ts). Every mutation of AHP state goes through `publish`.
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { HostStore, SessionRow } from "../../store/host/store.js";
import type { BackendEvent, HistoryTurn } from "./backend-schema.js";
import { ROOT } from "./ahp-constants.js";
import { ActionLog, continueAcrossRuns } from "./action-log.js";
import { CommandTracker, type AnyRoute } from "./commands.js";
import { reduceAction } from "./reducer.js";
import { applyBackendEvent, historyToTurn } from "./backend-events.js";
import * as P from "./projection.js";
import { mcpHub } from "./mcp-channels.js";
import { resourceSnapshot, sessionResourceChannels, sessionResourcesRemoved } from "./resources.js";
import { clientToolsSessionRemoved } from "./client-tools.js";
import { TurnCheckpoints } from "./turn-checkpoint.js";
import { applyChatExtra, applyChatOrder, chatExtra, sessionFromRow, sessionRow } from "./state-rows.js";
import { markDiscontinuous } from "./managed-invocations.js";
import { becomesUnread, markUnread } from "./status-flags.js";
import { channelRemoved } from "./channel-removals.js";
import {
  hashToken,
  nowIso,
  sameHash,
  type ChatModel,
  type CommandOutcome,
  type Envelope,
  type Json,
  type Origin,
  type ProviderRoute,
  type SessionModel,
  type Subscriber,
} from "./model.js";

export { STATUS, REPLAY_LIMIT, COMMAND_DEADLINE_MS, hashToken, findTool } from "./model.js";
export type { ChatModel, CommandOutcome, Envelope, Origin, ProviderRoute, SessionModel, SessionRoute, Subscriber, TurnModel } from "./model.js";

function b64(buf: Buffer): string {
  return buf.toString("base64url");
}

function summaryFields(c: ChatModel): { status: unknown; modifiedAt: unknown; title: unknown } {
  const sum = P.chatSummary(c);
  return { status: sum.status, modifiedAt: sum.modifiedAt, title: sum.title };
}

export class HostState {
  readonly hostId: string;
  readonly sessions = new Map<string, SessionModel>();
  readonly chatIndex = new Map<string, ChatModel>();
  readonly sourceIndex = new Map<string, string>(); // sourceId -> session uri
  readonly aliasIndex = new Map<string, string>(); // alias -> session uri
  readonly creations = new Map<string, { provider: string; tokenHash: string }>();
  readonly providers = new Map<string, ProviderRoute>(); // provider id -> route
  /** Chat URIs with a `create_chat` in flight or of uncertain outcome: reserved against reuse. */
  readonly reservedChats = new Set<string>();
  /** commandId of a complete_input -> the client origin to echo when the runtime resolves it. */
  readonly inputOrigins = new Map<string, Origin>();
  readonly actions: ActionLog;
  readonly commands: CommandTracker;
  /** Active-turn checkpoints (turn-checkpoint.ts); `flushAll` before the store closes. */
  readonly checkpoints = new TurnCheckpoints((c) => this.persistChat(c));
  readonly log: (msg: string) => void;
  /**
   * Set once a write could not be made durable: memory and disk have diverged, so inspection
   * answers `inspection_unavailable` rather than a healthy-looking snapshot. Never cleared.
   */
  poisoned: string | undefined;
  /** v13: the operator's session content quota in bytes (`--session-content-quota`); undefined: none. */
  sessionContentQuota: number | undefined;

  constructor(
    readonly store: HostStore,
    log: (msg: string) => void,
  ) {
    this.log = log;
    this.actions = new ActionLog((channel, action) => reduceAction(this, channel, action));
    this.commands = new CommandTracker(log);
    this.hostId = store.hostId();
    continueAcrossRuns(this.actions, store, log, (reason) => this.poison(reason));
    this.restore();
    store.onFailure = (e) => this.poison(`persistence failed: ${e.message}`);
  }

  /** Mark the state as no longer matching durable storage (logged once). */
  poison(reason: string): void {
    if (this.poisoned !== undefined) return;
    this.poisoned = reason;
    this.log(`host state poisoned: ${reason}`);
  }

  /** The host-wide sequence number of the newest published envelope. */
  get serverSeq(): number {
    return this.actions.serverSeq;
  }
  set serverSeq(v: number) {
    this.actions.serverSeq = v;
  }
  get subs(): Map<string, Set<Subscriber>> {
    return this.actions.subs;
  }
  get pending(): CommandTracker["pending"] {
    return this.commands.pending;
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
      chat.title = c.title; // the primary chat was made with the session's title: its own row says what clients saw
      const legacy = c.legacyTurns && c.legacyTurns !== "[]" ? (JSON.parse(c.legacyTurns) as Json[]) : [];
      chat.turns = [...legacy, ...c.turns.map((t) => JSON.parse(t) as Json)];
      chat.durableTurns = c.turns.length;
      chat.lastError = chat.turns.at(-1)?.state === "error"; // a chat whose last turn failed stays Error (ChatSummary.status)
      if (legacy.length > 0) {
        chat.rewriteTurns = true; // migrate a whole-transcript row to one row per turn
        this.persistChat(chat);
      }
      if (c.nextCursor) chat.nextCursor = c.nextCursor;
      if (!applyChatExtra(chat, JSON.parse(c.extra) as Json)) this.log(`chat ${c.uri}: an unreadable or already completed active-turn checkpoint was dropped`);
      this.restoreTurnInputs(s, chat);
    }
    // Managed turns restored above are output-discontinuous ("restored disconnected host").
    for (const s of this.sessions.values()) applyChatOrder(s); // a backend's session/chatsReordered (chat-09.ts)
    for (const s of this.sessions.values()) if (s.extra.managed !== undefined) markDiscontinuous(this, s);
    for (const a of this.store.loadAliases()) if (this.sessions.has(a.sessionUri)) this.aliasIndex.set(a.alias, a.sessionUri);
    for (const c of this.store.loadCreations()) this.creations.set(c.sessionUri, { provider: c.provider, tokenHash: c.tokenHash });
  }

  private newSession(row: SessionRow): SessionModel {
    const s = sessionFromRow(row);
    this.ensureChat(s, row.chatUri, row.title);
    return s;
  }

  /** The chat `uri` of session `s`, created (and indexed) when missing. */
  ensureChat(s: SessionModel, uri: string, title: string): ChatModel {
    let c = s.chats.get(uri);
    if (!c) {
      c = { uri, sessionUri: s.uri, title, modifiedAt: s.modifiedAt, turns: [], durableTurns: 0, rewriteTurns: false, lastError: false, draining: false, queuedMessages: [], inputs: new Map(), inputTurns: new Map(), partSeq: 0 };
      s.chats.set(uri, c);
      this.chatIndex.set(uri, c);
    }
    return c;
  }

  persistSession(s: SessionModel): void {
    this.store.putSession(sessionRow(s));
  }
  /** Persist a chat (metadata, new turn rows, the active turn's checkpoint); returns the size of its metadata text. */
  persistChat(c: ChatModel): number {
    const extraText = JSON.stringify(chatExtra(c));
    this.checkpoints.written(c);
    this.store.putChat({ uri: c.uri, sessionUri: c.sessionUri, title: c.title, nextCursor: c.nextCursor ?? null, extra: extraText });
    // Incremental: only turns not yet durable are serialized (a whole rewrite only after history
    // was loaded in front), so a long transcript costs nothing per persist.
    if (c.rewriteTurns || c.durableTurns > c.turns.length) {
      this.store.replaceTurns(c.uri, c.turns.map((t) => JSON.stringify(t)));
      c.rewriteTurns = false;
    } else this.store.appendTurns(c.uri, c.durableTurns, c.turns.slice(c.durableTurns).map((t) => JSON.stringify(t)));
    c.durableTurns = c.turns.length;
    return extraText.length;
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
    /** The registering backend instance, checkpointed (`extra.lastInstanceId`) so a restarted host still tells a new incarnation. */
    instanceId?: string;
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
    if (opts.instanceId !== undefined) s.extra.lastInstanceId = opts.instanceId;
    const chat = this.chatIndex.get(s.primaryChat)!;
    if (opts.interactivity) chat.interactivity = opts.interactivity;
    if (opts.history && opts.history.length > 0) this.mergeHistory(chat, opts.history, opts.historyNextCursor);
    this.persistSession(s);
    if (created) {
      this.persistChat(chat);
      this.rootNotify("root/sessionAdded", { channel: ROOT, summary: this.summary(s) });
      this.publishRootCount(); // root reducers count sessions by this action, not by the notification
    }
    return { session: s, created };
  }

  /** Append backend history turns not already held (by id), in order. */
  private mergeHistory(chat: ChatModel, history: HistoryTurn[], cursor?: string): void {
    const have = new Set(chat.turns.map((t) => t.id as string));
    if (chat.activeTurn) have.add(chat.activeTurn.id); // a restored active turn is not history
    let added = false;
    for (const h of history) {
      if (have.has(h.id)) continue;
      chat.turns.push(historyToTurn(h));
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
    const resources = sessionResourceChannels(this, uri);
    for (const u of [uri, ...s.chats.keys(), ...resources]) {
      channelRemoved(this, u);
      this.actions.dropChannel(u);
    }
    for (const c of s.chats.keys()) this.chatIndex.delete(c);
    this.creations.delete(uri);
    mcpHub(this).sessionRemoved(uri);
    sessionResourcesRemoved(this, uri);
    clientToolsSessionRemoved(this, uri);
    this.store.removeSession(uri);
    this.rootNotify("root/sessionRemoved", { channel: ROOT, session: uri });
    this.publishRootCount();
  }

  // ── Publication (action-log.ts) ───────────────────────────────────────────
  publish(channel: string, action: Json, origin?: Origin, rejectionReason?: string): Envelope {
    // Streaming text and usage never change a chat's summary fields: skip the check on the hot path.
    const t = action.type;
    const c = rejectionReason === undefined && t !== "chat/delta" && t !== "chat/reasoning" && t !== "chat/usage" ? this.chatIndex.get(channel) : undefined;
    if (c && !c.announced) c.announced = summaryFields(c);
    const unread = rejectionReason === undefined ? becomesUnread(this, channel, action) : undefined;
    const env = this.actions.publish(channel, action, origin, rejectionReason);
    if (unread) markUnread(this, unread);
    if (c) this.announceChatSummary(c);
    if (c && (t === "chat/turnComplete" || t === "chat/turnCancelled" || t === "chat/error")) this.retireTurnInputs(c);
    return env;
  }

  /**
   * A restored active turn's unanswered questions are still pending: the chat and the session list them again
   * (the session's status already says InputNeeded through the turn), and the turn's end retires them as usual.
   */
  private restoreTurnInputs(s: SessionModel, c: ChatModel): void {
    const t = c.activeTurn;
    if (!t) return;
    for (const p of t.responseParts) {
      const req = p.request as Json | undefined;
      if (p.kind !== "inputRequest" || p.response !== undefined || typeof req?.id !== "string") continue;
      c.inputs.set(req.id, req);
      c.inputTurns.set(req.id, t.id);
      const key = `input:${c.uri}:${req.id}`;
      s.inputNeeded.set(key, { id: key, chat: c.uri, kind: "chatInput", request: structuredClone(req) });
    }
  }

  /** A settled turn retired its input requests from the chat: drop their session input-needed entries too. */
  private retireTurnInputs(c: ChatModel): void {
    const s = this.sessions.get(c.sessionUri);
    if (!s) return;
    for (const [id, req] of s.inputNeeded) {
      const r = req.request as Json | undefined;
      if (req.chat === c.uri && req.kind === "chatInput" && typeof r?.id === "string" && !c.inputs.has(r.id)) this.publish(s.uri, { type: "session/inputNeededRemoved", id });
      // A call paused for authentication ends with its turn (the turn's end cancels it).
      else if (req.chat === c.uri && (req.kind === "toolAuthentication" || req.kind === "toolClientExecution")) this.publish(s.uri, { type: "session/inputNeededRemoved", id });
    }
  }

  /**
   * After a chat action: when the chat's summary fields (status, modifiedAt, title) differ from
   * what its session's subscribers last heard, publish `session/chatUpdated` with the changes,
   * so the session's chat catalogue follows the chat without a re-snapshot.
   */
  private announceChatSummary(c: ChatModel): void {
    const s = this.sessions.get(c.sessionUri);
    if (!s) return;
    const now = summaryFields(c);
    const last = c.announced ?? now;
    const changes: Json = {};
    for (const k of ["status", "modifiedAt", "title"] as const) if (now[k] !== last[k]) changes[k] = now[k];
    c.announced = now;
    if (Object.keys(changes).length > 0) this.publish(s.uri, { type: "session/chatUpdated", chat: c.uri, changes });
  }
  rootNotify(method: string, params: Json): void {
    this.actions.rootNotify(method, params);
  }
  replaySince(since: number, channels: Set<string>, accept?: (key: string) => boolean): Envelope[] | null {
    return this.actions.replaySince(since, channels, accept);
  }
  subscribe(channel: string, sub: Subscriber): void {
    this.actions.subscribe(channel, sub);
  }
  unsubscribe(channel: string, sub: Subscriber): void {
    this.actions.unsubscribe(channel, sub);
  }

  // ── Snapshots and summaries (projection.ts) ───────────────────────────────
  channelExists(uri: string): boolean {
    return uri === ROOT || this.sessions.has(uri) || this.chatIndex.has(uri) || resourceSnapshot(this, uri) !== undefined;
  }
  snapshot(uri: string): Json | undefined {
    return P.snapshot(this, uri);
  }
  agents(): Json[] {
    return P.agents(this);
  }
  publishAgents(): void {
    this.publish(ROOT, { type: "root/agentsChanged", agents: this.agents() });
  }
  publishRootCount(): void {
    this.publish(ROOT, { type: "root/activeSessionsChanged", activeSessions: this.sessions.size });
  }
  sessionStatus(s: SessionModel): number {
    return P.sessionStatus(this, s);
  }
  summary(s: SessionModel): Json {
    return P.summary(this, s);
  }

  /** Emit root/sessionSummaryChanged when status changed (title is sent by setTitle). */
  summaryChanged(s: SessionModel, force = false): void {
    const st = this.sessionStatus(s);
    if (!force && st === s.lastStatus) return;
    s.lastStatus = st;
    s.modifiedAt = nowIso();
    this.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { status: st, modifiedAt: s.modifiedAt } });
  }
  /** Tell root subscribers that a session's chat catalogue changed. */
  chatsChanged(s: SessionModel): void {
    s.modifiedAt = nowIso();
    this.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { chats: this.summary(s).chats, modifiedAt: s.modifiedAt } });
  }
  setTitle(s: SessionModel, title: string, origin: Origin | undefined): void {
    this.publish(s.uri, { type: "session/titleChanged", title }, origin);
    this.persistSession(s);
    this.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { title, modifiedAt: s.modifiedAt } });
  }

  // ── Backend events (backend-events.ts) ────────────────────────────────────
  /** Reduce one validated backend event; null on success, else a semantic-rejection message. */
  applyEvent(s: SessionModel, chat: ChatModel, ev: BackendEvent): string | null {
    return applyBackendEvent(this, s, chat, ev);
  }

  // ── Commands (commands.ts) ────────────────────────────────────────────────
  sendCommand(route: AnyRoute, frame: Json, onOutcome: (o: CommandOutcome) => void, commandId?: string): string {
    return commandId === undefined ? this.commands.send(route, frame, onOutcome) : this.commands.send(route, frame, onOutcome, commandId);
  }
  settle(commandId: string, o: CommandOutcome, from?: AnyRoute | ((r: AnyRoute) => boolean)): boolean {
    return this.commands.settle(commandId, o, from);
  }
  failRoute(match: (r: AnyRoute) => boolean): void {
    this.commands.failRoute(match);
  }
}
