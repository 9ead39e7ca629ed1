/**
 * The correlation core of the client: framing, decoding, pending requests, attached turns and logins, failure.
 *
 * Contract:
 * - Records are decoded strictly in arrival order, synchronously, against the current decode bounds (local before
 *   a profile is accepted, the accepted advertised limits after). Success hooks run in that same order, so a turn
 *   or login exists before its first event is decoded.
 * - Any contract violation (bounds, shape, unknown kind/event/enum, identity not matching a pending request or an
 *   attached turn/login, duplicate/regressing sequence, event after terminal, uncorrelated response) fails the
 *   connection with `ProtocolError`: reading stops, the service's stdin is ended (so it cancels its work), every
 *   pending request rejects and every open turn/login rejects. Nothing is ever resent.
 * - End of the service's output fails everything still open with `ConnectionClosedError` — never a terminal.
 */
import type { Readable, Writable } from "node:stream";
import { utf8Length } from "../../core/utf8.js";
import { LineSplitter } from "../../transport/jsonl.js";
import { decodeRecord, type DecodeBounds, type EventMessage, type ResponseMessage } from "./envelope.js";
import { ConnectionClosedError, ProtocolError, RequestError, ServiceError } from "./errors.js";
import { decodeActivityEvent, decodeDelta, decodeLoginProgress, decodeLoginTerminal, decodeStarted, decodeTerminal } from "./events.js";
import type { LocalBounds, Operation, Profile } from "./preflight.js";
import { Settle, type Login, type Turn } from "./streams.js";
import { DecodeError, type Obj } from "./validate.js";

/** Methods whose successful response may name a session the request did not (the session it created). */
const CREATES_SESSION: ReadonlySet<string> = new Set(["session.create", "turn.start"]);

interface Pending {
  method: Operation;
  sessionId: string | null;
  /** Decodes the success payload and runs side effects (turn/login registration) in record order. Throws DecodeError. */
  accept(payload: Obj, env: ResponseMessage): unknown;
  settle: Settle<unknown>;
}

export class Connection {
  /** The accepted profile (null before initialization or after a failed renegotiation). */
  profile: Profile | null = null;
  failure: Error | null = null;
  readonly closed = new Settle<void>();
  readonly turns = new Map<string, Turn>();
  readonly logins = new Map<string, Login>();
  private readonly pending = new Map<string, Pending>();
  private readonly splitter: LineSplitter;
  private counter = 0;
  private pressured = 0;

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    readonly local: LocalBounds,
    private readonly onFailure: (err: Error) => void = () => {},
  ) {
    this.splitter = new LineSplitter(() => this.bounds().maxRecordBytes, { oversize: "stop" });
    input.on("data", this.onData);
    input.on("end", () => this.end(this.splitter.pending > 0 ? "the service output ended mid-record" : undefined));
    input.on("close", () => this.end());
    input.on("error", () => this.end("the service output failed"));
    output.on("error", () => {});
  }

  /** Decode bounds: the accepted advertised limits, else the local ones. */
  bounds(): DecodeBounds {
    const L = this.profile?.limits;
    const l = this.local;
    if (L === undefined)
      return { ...l, maxErrorMessageBytes: l.maxErrorMessageBytes };
    return {
      maxRecordBytes: L.max_record_bytes,
      maxPayloadBytes: L.max_payload_bytes,
      maxStringBytes: L.max_string_bytes,
      maxJsonDepth: L.max_json_depth,
      maxArrayItems: L.max_array_items,
      maxObjectFields: L.max_object_fields,
      maxIdBytes: L.max_id_bytes,
      maxNameBytes: L.max_name_bytes,
      maxErrorMessageBytes: L.max_error_message_bytes,
    };
  }

  /** Called by stream queues: stop reading the service while any consumer is far behind. */
  readonly pressure = (high: boolean): void => {
    this.pressured += high ? 1 : -1;
    if (this.pressured > 0) this.input.pause();
    else if (this.failure === null) this.input.resume();
  };

  private readonly onData = (chunk: Buffer | string): void => {
    if (this.failure !== null) return;
    for (const f of this.splitter.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)) {
      if (this.failure !== null) return;
      if (f.kind === "too_large") return this.fail(new ProtocolError("a record exceeds the record bound"));
      const rec = f.bytes;
      try {
        const m = decodeRecord(rec, this.bounds());
        if (m.kind === "response") this.onResponse(m);
        else this.onEvent(m);
      } catch (err) {
        if (err instanceof DecodeError) return this.fail(new ProtocolError(err.message));
        throw err;
      }
    }
  };

  private onResponse(m: ResponseMessage): void {
    if (m.requestId === null) throw new DecodeError("uncorrelated response (this client sends only valid records)");
    const p = this.pending.get(m.requestId);
    if (p === undefined) throw new DecodeError("response for no pending request");
    if (m.method !== p.method) throw new DecodeError("response method does not match its request");
    if (m.error !== null) {
      this.pending.delete(m.requestId);
      if (m.sessionId !== null && m.sessionId !== p.sessionId) throw new DecodeError("error response names another session");
      p.settle.reject(new ServiceError(p.method, m.error.code, m.error.message));
      return;
    }
    const payload = m.payload as Obj;
    if (p.sessionId !== null ? m.sessionId !== p.sessionId : m.sessionId !== null && !CREATES_SESSION.has(p.method))
      throw new DecodeError("response session_id does not match its request");
    // Still pending while `accept` decodes: a decode failure rejects it through `fail`.
    const value = p.accept(payload, m);
    this.pending.delete(m.requestId);
    p.settle.resolve(value);
  }

  private onEvent(m: EventMessage): void {
    const profile = this.profile;
    if (profile === null) throw new DecodeError("event before initialization");
    const turn = this.turns.get(m.requestId);
    if (turn !== undefined) {
      if (!m.event.startsWith("turn.")) throw new DecodeError("auth event correlated to a turn");
      if (m.sessionId !== turn.sessionId) throw new DecodeError("turn event names another session");
      const same = (turnId: string, seq: number): void => {
        if (turnId !== turn.turnId) throw new DecodeError("turn event names another turn");
        if (m.event === "turn.started") {
          if (turn.started) throw new DecodeError("duplicate turn.started");
        } else if (!turn.started) throw new DecodeError("turn event before turn.started");
        else if (seq <= turn.lastSequence) throw new DecodeError("duplicate or regressing turn sequence");
        turn.lastSequence = seq;
      };
      switch (m.event) {
        case "turn.started": {
          const s = decodeStarted(m.payload, profile);
          if (s.session_id !== turn.sessionId) throw new DecodeError("turn.started names another session");
          same(s.turn_id, s.sequence);
          turn.started = true;
          return;
        }
        case "turn.assistant_delta": {
          const d = decodeDelta(m.payload, profile);
          same(d.turn_id, d.sequence);
          return turn.updates.push({ type: "delta", sequence: d.sequence, text: d.text });
        }
        case "turn.activity": {
          const a = decodeActivityEvent(m.payload, profile);
          same(a.turn_id, a.sequence);
          return turn.updates.push({ type: "activity", sequence: a.sequence, activity: a.activity });
        }
        case "turn.terminal": {
          const t = decodeTerminal(m.payload, profile);
          if (t.session_id !== turn.sessionId) throw new DecodeError("turn.terminal names another session");
          same(t.turn_id, t.sequence);
          this.turns.delete(m.requestId);
          turn.settle.resolve(t);
          turn.updates.end();
          return;
        }
        case "auth.login.progress":
        case "auth.login.terminal":
        default:
          throw new DecodeError("auth event correlated to a turn");
      }
    }
    const login = this.logins.get(m.requestId);
    if (login === undefined) throw new DecodeError("event for no active turn or login");
    if (m.sessionId !== null) throw new DecodeError("auth event carries a session");
    if (m.event === "auth.login.progress") {
      const pr = decodeLoginProgress(m.payload, profile);
      if (pr.login_id !== login.loginId || pr.provider_id !== login.providerId) throw new DecodeError("login event names another login");
      return login.updates.push(pr);
    }
    if (m.event !== "auth.login.terminal") throw new DecodeError("turn event correlated to a login");
    const t = decodeLoginTerminal(m.payload, profile);
    if (t.login_id !== login.loginId || t.provider_id !== login.providerId) throw new DecodeError("login event names another login");
    this.logins.delete(m.requestId);
    login.settle.resolve(t);
    login.updates.end();
  }

  /**
   * Sends one strict request. Bounds are the smaller of local and accepted advertised ones; a request that does not
   * fit is refused locally (`RequestError`) and never sent. Resolves with `accept`'s result.
   */
  send<T>(method: Operation, payload: Obj, sessionId: string | null, accept: (payload: Obj, env: ResponseMessage) => T): Promise<T> {
    if (this.failure !== null) return Promise.reject(this.failure);
    if (!this.output.writable) return Promise.reject(new ConnectionClosedError("the service input is closed"));
    const b = this.bounds();
    const requestId = `c${++this.counter}`;
    const record: Obj = { protocol_version: 1, kind: "request", request_id: requestId, method, payload };
    if (sessionId !== null) record.session_id = sessionId;
    const payloadJson = JSON.stringify(payload);
    if (utf8Length(payloadJson) > Math.min(b.maxPayloadBytes, this.local.maxPayloadBytes))
      return Promise.reject(new RequestError("the request payload exceeds the payload bound"));
    const line = JSON.stringify(record) + "\n";
    if (utf8Length(line) > Math.min(b.maxRecordBytes, this.local.maxRecordBytes))
      return Promise.reject(new RequestError("the request exceeds the record bound"));
    const settle = new Settle<T>();
    this.pending.set(requestId, { method, sessionId, accept, settle: settle as Settle<unknown> });
    this.output.write(line);
    return settle.promise;
  }

  private end(reason?: string): void {
    if (this.failure === null) this.fail(new ConnectionClosedError(reason));
    this.closed.resolve();
  }

  /** Fails the connection once: stop reading, end the service's input, reject everything still open. */
  fail(err: Error): void {
    if (this.failure !== null) return;
    this.failure = err;
    this.input.off("data", this.onData);
    this.input.resume(); // drain to EOF without decoding, so the child can exit
    if (!this.output.writableEnded) this.output.end();
    for (const p of this.pending.values()) p.settle.reject(err);
    this.pending.clear();
    for (const t of this.turns.values()) {
      t.settle.reject(err);
      t.updates.end(err);
    }
    this.turns.clear();
    for (const l of this.logins.values()) {
      l.settle.reject(err);
      l.updates.end(err);
    }
    this.logins.clear();
    this.onFailure(err);
  }

  /** Ends the service's input (EOF: it cancels active turns/logins and exits) and waits for its output to end. */
  async close(): Promise<void> {
    if (!this.output.writableEnded) this.output.end();
    await this.closed.promise;
  }
}
