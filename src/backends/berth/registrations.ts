/**
 * The Berth backend's session registrations with the host (v8 `register_session` on its provider connection):
 * building and sending them, and matching the host's answers (`session_registered`, or an `error` naming the
 * `requestId`) to the session that asked.
 *
 * Contracts:
 *  - A session has at most one registration in flight: one asked for meanwhile (refusals in a row, a repeated
 *    `provider_registered`) is the one in flight, since a second would only replace it.
 *  - A registration first reads the session's newest history page (the hello carries it), so it is sent later; a
 *    session disposed, or a connection lost, meanwhile drops it unsent. One ready while its session's disposal is
 *    being written (`disposing`) waits for that write: sent if the disposal failed (the session is still served),
 *    dropped if it took effect.
 *  - Disposal may still race an answer: a registration sent before the session was disposed is answered after
 *    (spec: the host removes the session only once the provider accepts `dispose_session`, and may grant a
 *    registration it read before that). Such an answer never revives the session: the registration it grants is
 *    one nothing here will use, so it is retired at once with `unregister_session` naming its epoch. (The host
 *    may have retired it already with the disposal; its refusal of the `unregister_session` is then expected.)
 */
import { randomUUID } from "node:crypto";
import type { Json } from "../../core/json-bounds.js";
import type { LiveSession } from "./sessions.js";

export interface RegistrationDeps {
  /** The constant part of every hello (protocol version, instance, provider, display name, capabilities). */
  base: Json;
  sourceOf(sessionId: string): string;
  /** The session's newest completed turns (`hello.history`), and the cursor of older ones. */
  newestPage(s: LiveSession): Promise<{ turns: Json[]; next: string | null }>;
  send(frame: Json): boolean;
  connected(): boolean;
  log(msg: string): void;
}

export class Registrations {
  /** Registrations sent and not answered yet, by requestId. */
  private readonly asked = new Map<string, LiveSession>();
  /** The registration in flight of each session (read, or sent and unanswered), by requestId. */
  private readonly pending = new Map<LiveSession, string>();
  private begun: Promise<void> = Promise.resolve();

  constructor(private readonly d: RegistrationDeps) {}

  /** Register `s`, unless it is disposed or a registration of it is in flight already. */
  register(s: LiveSession): Promise<void> {
    if (s.disposed === true || this.pending.has(s)) return Promise.resolve();
    const requestId = randomUUID();
    this.pending.set(s, requestId);
    const sent = this.send(s, requestId);
    this.begun = Promise.all([this.begun, sent]).then(() => undefined);
    return sent;
  }

  /** `s` is disposed: a registration of it still reading its history is dropped (one already sent stays known). */
  disposed(s: LiveSession): void {
    this.pending.delete(s);
  }

  /** The connection is gone: registrations in flight drop out (a later connection registers its sessions itself). */
  clear(): void {
    this.asked.clear();
    this.pending.clear();
  }

  /** Resolves once every registration begun so far has been sent (or dropped). */
  sent(): Promise<void> {
    return this.begun;
  }

  /**
   * A `session_registered`: the session it registers, to be routed from now on; undefined when it answers nothing
   * asked here, or a session disposed since (that registration is then unregistered).
   */
  answered(f: Json): LiveSession | undefined {
    const requestId = f.requestId;
    const s = typeof requestId === "string" ? this.asked.get(requestId) : undefined;
    if (s === undefined) return undefined;
    this.settle(s, requestId as string);
    if (s.disposed !== true) return s;
    const session = f.session;
    const epoch = f.backendConnectionId;
    if (typeof session !== "string" || typeof epoch !== "string") return undefined; // names no route to retire
    this.d.log("berth runtime: the host registered a session disposed meanwhile; unregistering that registration");
    this.d.send({ type: "unregister_session", requestId: randomUUID(), session, backendConnectionId: epoch });
    return undefined;
  }

  /** An `error`: true when it refuses a registration asked here (that session may register again). */
  refused(f: Json): boolean {
    const requestId = f.requestId;
    const s = typeof requestId === "string" ? this.asked.get(requestId) : undefined;
    if (s === undefined) return false;
    this.settle(s, requestId as string);
    this.d.log(`berth runtime: registration of a session refused (${String(f.code)})`);
    return true;
  }

  private settle(s: LiveSession, requestId: string): void {
    this.asked.delete(requestId);
    if (this.pending.get(s) === requestId) this.pending.delete(s);
  }

  private async send(s: LiveSession, requestId: string): Promise<void> {
    const hello: Json = {
      ...this.d.base,
      sourceId: this.d.sourceOf(s.entry.sessionId),
      title: s.entry.title,
      runtimeIdle: s.primary.rt?.busy !== true,
    };
    if (s.entry.model !== undefined) hello.model = s.entry.model;
    if (s.entry.thinkingLevel !== undefined) hello.thinkingLevel = s.entry.thinkingLevel;
    if (s.entry.requestedSession && s.entry.creationToken) {
      hello.requestedSession = s.entry.requestedSession;
      hello.creationToken = s.entry.creationToken;
    }
    // Its newest turns, older ones by cursor: a host that never saw the session (made by another door) or lost
    // its state starts with them; a host that holds them merges nothing (turns are matched by ID).
    const page = await this.d.newestPage(s).catch(() => null);
    if (page !== null && page.turns.length > 0) {
      hello.history = page.turns;
      if (page.next !== null) hello.historyNextCursor = page.next;
    }
    if (s.disposing !== undefined) await s.disposing;
    // Dropped meanwhile: with its connection (`clear`), or with its session (`disposed`).
    if (this.pending.get(s) !== requestId) return;
    if (s.disposed === true) return void this.pending.delete(s);
    if (!this.d.connected()) return void this.pending.delete(s);
    this.asked.set(requestId, s);
    this.d.send({ type: "register_session", requestId, hello });
  }
}
