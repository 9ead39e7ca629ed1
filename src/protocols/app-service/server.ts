/**
 * The app-service dispatcher over a byte stream pair (stdio today). Transport-neutral: it takes a Readable and a
 * Writable and the method families; advertised transport names are injected by the composition root.
 *
 * Lifecycle contract:
 * - Records are handled one at a time; each record's outbound batch is handed to the output before the next
 *   record is read (worker-mode methods answer later, when they settle).
 * - Request IDs are reserved from acceptance until their response is written, or until `release()` for held
 *   (long-lived) requests. Reuse while reserved -> duplicate_request_id.
 * - EOF: stop reading, drain families (reverse order), wait for worker responses, flush output, resolve 0.
 * - `requestShutdown()` (the composition root calls it on SIGTERM, SIGINT and SIGHUP) shuts down exactly like EOF:
 *   input stops, active turns are cancelled (their tool process groups killed, terminals written), resolve 0.
 * - Output failure or an unencodable outbound message: stop reading, drain with output disabled, resolve 1,
 *   with one diagnostic line on stderr.
 */
import { mark } from "../../runtime/debug-timing.js";
import { buildProblem } from "../../core/build-problem.js";
import type { Readable, Writable } from "node:stream";
import { LIMITS } from "./limits.js";
import { wireError, type ErrorCode } from "./errors.js";
import { decodeRecord, type Frame } from "../../transport/jsonl.js";
import { JsonlTransport } from "../../transport/stdio.js";
import { OUTPUT_GRACE_MS } from "../../transport/line-writer.js";
import { isLazyFamily, type EventName, type LazyFamily, type MethodDescriptor, type MethodFamily, type Outcome, type RequestContext, type Reservation } from "./descriptor.js";
import { parseRecord, validateEnvelope, type Identities } from "./envelope.js";
import { OutputLimitError, encodeEvent, encodeNumberedEvent, encodeResponse, eventTail } from "./output.js";
import type { InitState } from "./service-methods.js";

export interface AppServiceOptions {
  input: Readable;
  output: Writable;
  /** Eager or lazily loaded families; drained in reverse order of this list. */
  families: Array<MethodFamily | LazyFamily>;
  state: InitState;
  /** One diagnostic line to stderr (never request data or secrets). */
  log: (line: string) => void;
  /**
   * Input-state diagnostics (the composition root prints them with `BERTH_DEBUG_IO=1`): `paused` when reading
   * stops because the output is backed up, `resumed` when it goes on, `eof` once input has ended (EOF, shutdown or
   * a fatal output error) and no more records will be read. `records`: input records handled so far.
   */
  onInput?: (e: { state: "paused" | "resumed" | "eof"; records: number }) => void;
  /**
   * At the end, how long output that makes no progress is waited for before it is left behind (a client that closed
   * stdin but holds stdout open unread); `OUTPUT_GRACE_MS` unless given.
   */
  outputGraceMs?: number;
}

interface Slot {
  /** Encoded events waiting for this request's response to be written. */
  held: string[] | null;
  /** Reservation outlives the response. */
  kept: boolean;
  responded: boolean;
  /** A `turn.assistant_delta` of this request was written (the first one is flushed at once). */
  delta?: true;
}

/** Quiet input time before `idle` families are prefetched. */
const IDLE_PREFETCH_MS = 300;

const NULL_IDS: Identities = { requestId: null, sessionId: null, method: null };

export class AppServiceServer {
  private readonly io: JsonlTransport;
  private readonly methods = new Map<string, MethodDescriptor>();
  /** Loaded family per position in `opts.families` (undefined until a lazy one loads). */
  private readonly loaded: Array<MethodFamily | undefined>;
  private readonly lazy = new Map<string, { index: number; promise?: Promise<MethodFamily> | undefined }>();
  private prefetched = false;
  /** An input record is being handled (parsed, its family loaded, its inline handler run). */
  private handling = false;
  private readonly handled: Array<() => void> = [];
  /**
   * When the last input record was handled or the last turn ended (for idle-time prefetch: quiet means no input and
   * no turn for IDLE_PREFETCH_MS).
   */
  private lastInputAt = 0;
  /** Requests whose turn has written an event but not its `turn.terminal` yet (`idle` prefetch waits for none). */
  private readonly openTurns = new Set<Slot>();
  /** Whether a session was requested (`session` families' prefetch), and who waits for it. */
  private sessionRequested = false;
  private sessionWaiter: (() => void) | null = null;
  private readonly reserved = new Map<string, Slot>();
  private readonly workers = new Set<Promise<void>>();
  private eventCounter = 0;
  private fatal: string | null = null;
  private stopping = false;
  private records = 0;

  constructor(private readonly opts: AppServiceOptions) {
    this.loaded = opts.families.map((f, index) => {
      if (!isLazyFamily(f)) {
        for (const d of f.descriptors) this.methods.set(d.method, d);
        return f;
      }
      for (const m of f.methods) this.lazy.set(m, { index });
      return undefined;
    });
    this.io = new JsonlTransport(opts.input, opts.output, {
      maxRecordBytes: LIMITS.max_record_bytes,
      highWaterBytes: 256 * 1024,
      onOutputBroken: () => this.stop("output stream failed"),
    });
  }

  /** Runs until EOF or failure; resolves with the process exit code. */
  async run(): Promise<number> {
    for await (const frame of this.io.frames()) {
      if (this.stopping) break;
      await this.handleFrame(frame);
    }
    this.opts.onInput?.({ state: "eof", records: this.records });
    await this.shutdown();
    if (this.fatal !== null) {
      this.opts.log(`berth service: ${this.fatal}; stopping`);
      return 1;
    }
    return 0;
  }

  /** Stops reading and shuts down as at EOF. Idempotent. */
  requestShutdown(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.io.closeInput();
  }

  private stop(reason: string): void {
    this.fatal ??= reason;
    this.stopping = true;
    this.io.closeInput();
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    // Turns are cancelled now and what they still write is bounded: a client that stopped reading must not hold their
    // workers on backpressure (the output's own end is bounded by `outputGraceMs`).
    this.io.unthrottle();
    // A family still loading must finish so its drain can run; unloaded families hold nothing.
    await Promise.allSettled([...this.lazy.values()].map((l) => l.promise).filter((p) => p !== undefined));
    const families = [...this.loaded].reverse();
    for (const f of families) {
      if (!f?.drain) continue;
      try {
        await f.drain();
      } catch (err) {
        this.opts.log(`berth service: drain failed (${err instanceof Error ? err.name : "error"})`);
      }
    }
    while (this.workers.size > 0) await Promise.allSettled([...this.workers]);
    await this.io.close(this.opts.outputGraceMs ?? OUTPUT_GRACE_MS);
  }

  private async handleFrame(frame: Frame): Promise<void> {
    this.lastInputAt = Date.now();
    this.handling = true;
    try {
      if (frame.kind === "too_large") this.respondError(NULL_IDS, "record_too_large");
      else await this.handleRecord(frame.bytes);
    } finally {
      this.handling = false;
      for (const w of this.handled.splice(0)) w();
    }
    this.records++;
    this.io.flush();
    if (this.io.pressured) {
      this.opts.onInput?.({ state: "paused", records: this.records });
      await this.io.writable();
      this.opts.onInput?.({ state: "resumed", records: this.records });
    }
  }

  /** Resolves once no input record is being handled (prefetch yields to requests; see `prefetch`). */
  private async notHandling(): Promise<void> {
    while (this.handling && !this.stopping) await new Promise<void>((r) => this.handled.push(r));
  }

  private async handleRecord(bytes: Buffer): Promise<void> {
    const text = decodeRecord(bytes);
    const parsed = text === null ? null : parseRecord(text);
    if (parsed === null || !parsed.ok) return this.respondError(NULL_IDS, "invalid_json");
    const ids = parsed.ids;
    if (ids.requestId !== null && this.reserved.has(ids.requestId)) return this.respondError(ids, "duplicate_request_id", false);
    const decoded = validateEnvelope(parsed);
    if (!decoded.ok) return this.respondError(decoded.ids, decoded.error);
    const req = decoded.request;
    mark(`rx ${req.method}`);
    let d = this.methods.get(req.method);
    if (d === undefined && this.lazy.has(req.method)) {
      try {
        await this.load(this.lazy.get(req.method)!.index);
      } catch (err) {
        this.opts.log(`berth service: loading ${req.method} failed${buildProblem(err) !== undefined ? `: ${buildProblem(err)}` : ""}`);
        return this.respondError(ids, "internal_error");
      }
      d = this.methods.get(req.method);
    }
    if (d === undefined) return this.respondError(ids, "unsupported_operation");
    if ((d.sessionId === "forbidden" && req.sessionId !== null) || (d.sessionId === "required" && req.sessionId === null))
      return this.respondError(ids, "invalid_request");
    // A repeated member inside the payload: which value counts would be the parser's guess, not the client's.
    if (req.payloadRepeated) return this.respondError(ids, "invalid_payload");
    const params = d.parse(req.payload);
    if (!params.ok) return this.respondError(ids, params.error);
    if (!d.preInit && !this.opts.state.initialized) return this.respondError(ids, "not_initialized");

    const slot: Slot = { held: null, kept: false, responded: false };
    this.reserved.set(req.requestId, slot);
    const ctx = this.context(req.requestId, req.sessionId, d, slot);
    const settle = (o: Outcome): void => this.respond(req.requestId, req.sessionId, req.method, slot, o);
    if ((req.method === "session.create" || req.method === "session.open") && !this.sessionRequested) {
      this.sessionRequested = true;
      this.sessionWaiter?.();
    }
    const run = async (): Promise<void> => {
      let outcome: Outcome;
      try {
        outcome = await d.handle(ctx, params.value);
      } catch (err) {
        this.opts.log(`berth service: ${req.method} handler failed (${err instanceof Error ? err.name : "error"})`);
        outcome = { error: "internal_error" };
      }
      settle(outcome);
    };
    if (d.mode === "worker") {
      const p = run().finally(() => {
        this.workers.delete(p);
        this.io.flush();
      });
      this.workers.add(p);
    } else await run();
  }

  private load(index: number): Promise<MethodFamily> {
    const fam = this.opts.families[index] as LazyFamily;
    const first = this.lazy.get(fam.methods[0]!)!;
    if (first.promise === undefined) {
      mark(`load ${fam.methods[0]}`);
      const p = fam.load().then((f) => {
        mark(`loaded ${fam.methods[0]}`);
        this.loaded[index] = f;
        for (const d of f.descriptors) this.methods.set(d.method, d);
        return f;
      });
      for (const m of fam.methods) this.lazy.get(m)!.promise = p;
      p.catch(() => {
        for (const m of fam.methods) this.lazy.get(m)!.promise = undefined;
      });
    }
    return first.promise!;
  }

  /**
   * How long until the input has been quiet for IDLE_PREFETCH_MS: a prefetch waiting for a quiet input wakes then,
   * not up to twice as late (a fixed wait started before the last input), so its modules compile right after the
   * quiet period begins instead of where a frontend's next request (a replay picked from a list) likely lands.
   */
  private untilIdle(): number {
    return Math.max(1, this.lastInputAt + IDLE_PREFETCH_MS - Date.now());
  }

  /** After the first successful initialize is written, load lazy families in idle time. */
  private prefetch(): void {
    if (this.prefetched) return;
    this.prefetched = true;
    // One family at a time, in registration order (sessions first): a request for an early family
    // does not wait for later families' modules to compile. Each family after the first waits until no request is
    // being handled (a `session.create` right after `initialize` is not slowed down by the turn path compiling
    // underneath it), except `session` families, which wait for the first session request and then load while its
    // handler waits on the disk; `idle` families also wait for a quiet input.
    // setImmediate, not a timer: the first family starts loading as soon as the initialize response is written
    // (this event-loop turn's flush), while the client reads it and sends its next request, not a millisecond later.
    setImmediate(() => {
      void (async () => {
        let first = true;
        for (const [i, f] of this.opts.families.entries()) {
          if (!isLazyFamily(f)) continue;
          if (!first && f.prefetch !== "session") await this.notHandling();
          first = false;
          // A running turn is not idle, however quiet the input: a family compiling under it stalls its stream.
          while (f.prefetch === "idle" && !this.stopping && (this.openTurns.size > 0 || Date.now() - this.lastInputAt < IDLE_PREFETCH_MS))
            await new Promise((r) => setTimeout(r, this.openTurns.size > 0 ? IDLE_PREFETCH_MS : this.untilIdle()).unref());
          if (f.prefetch === "session") {
            while (!this.sessionRequested && !this.stopping && Date.now() - this.lastInputAt < IDLE_PREFETCH_MS) {
              await new Promise<void>((r) => {
                const timer = setTimeout(r, this.untilIdle()).unref();
                this.sessionWaiter = () => {
                  clearTimeout(timer);
                  r();
                };
              });
              this.sessionWaiter = null;
            }
            // Woken by a quiet input, not by a session request: a request that arrived since (a first replay after
            // a restart) is answered before this family compiles.
            if (!this.sessionRequested) await this.notHandling();
            // The session request's handler runs up to its first I/O (the session file's creation) first; this
            // family's modules then compile while that file is written and fsynced.
            await new Promise((r) => setImmediate(r));
          }
          if (this.stopping) return;
          await this.load(i).catch(() => undefined);
        }
      })();
    });
  }

  private context(requestId: string, sessionId: string | null, d: MethodDescriptor, slot: Slot): RequestContext {
    let tail: string | null = null;
    let tailEvent: EventName | null = null;
    let tailSid: string | null = null;
    return {
      requestId,
      sessionId,
      method: d.method,
      emit: (event: EventName, sid: string | null, payload: Record<string, unknown> | string) => {
        if (this.fatal !== null) return Promise.resolve();
        let line: string;
        try {
          if (typeof payload === "string") {
            // The per-delta path: the envelope around the payload is the same for every delta of a turn.
            if (tail === null || tailEvent !== event || tailSid !== sid) {
              tail = eventTail(requestId, sid, event);
              tailEvent = event;
              tailSid = sid;
            }
            line = encodeNumberedEvent(++this.eventCounter, tail, payload);
          } else line = encodeEvent(`ev-${++this.eventCounter}`, requestId, sid, event, payload);
        } catch (err) {
          this.stop(err instanceof OutputLimitError ? err.message : "event encoding failed");
          return Promise.resolve();
        }
        if (event === "turn.terminal") {
          this.openTurns.delete(slot);
          this.lastInputAt = Date.now(); // the quiet period starts again when the turn ends
        } else if (event === "turn.started") this.openTurns.add(slot);
        if (!slot.responded) (slot.held ??= []).push(line);
        else {
          this.io.send(line);
          // A turn's first delta goes out now, not after the rest of its provider chunk (often hundreds of deltas)
          // was decoded and queued: the output otherwise flushes once per event-loop turn (first-token latency).
          // Its terminal too, with everything queued before it: the work queued for the next check phase (the
          // provider's after-turn warm-up, opening its next connection) would otherwise run first.
          if (slot.delta === undefined && event === "turn.assistant_delta") {
            slot.delta = true;
            this.io.flush();
          } else if (event === "turn.terminal") this.io.flush();
        }
        return this.io.writable();
      },
      hold: (): Reservation => {
        slot.kept = true;
        return {
          release: () => {
            if (this.reserved.get(requestId) === slot) this.reserved.delete(requestId);
          },
        };
      },
    };
  }

  private respond(requestId: string, reqSessionId: string | null, method: string, slot: Slot, o: Outcome): void {
    const sessionId = o.sessionId !== undefined ? o.sessionId : reqSessionId;
    let line: string;
    try {
      line =
        o.error !== undefined
          ? encodeResponse(requestId, sessionId, method, { error: wireError(o.error) })
          : encodeResponse(requestId, sessionId, method, { payload: o.payload });
    } catch (err) {
      this.stop(err instanceof OutputLimitError ? err.message : "response encoding failed");
      return;
    }
    if (this.fatal !== null) return;
    this.io.send(line);
    mark(`tx ${method}`);
    slot.responded = true;
    if (method === "initialize" && o.error === undefined) this.prefetch();
    if (slot.held !== null) for (const e of slot.held) this.io.send(e);
    slot.held = null;
    // A lazy family's response (session.create, turn.start, ...) goes out now, not at the end of this event-loop
    // turn: work queued meanwhile (the turn path's modules loading in the background) would otherwise hold it back.
    // Eager families' responses (status, pipelined by the thousand) stay coalesced into one write per turn.
    if (this.lazy.has(method)) this.io.flush();
    if (!slot.kept && this.reserved.get(requestId) === slot) this.reserved.delete(requestId);
  }

  /** Error response for a record that never became an accepted request (no reservation is created or touched). */
  private respondError(ids: Identities, code: ErrorCode, _fresh = true): void {
    if (this.fatal !== null) return;
    this.io.send(encodeResponse(ids.requestId, ids.sessionId, ids.method, { error: wireError(code) }));
  }
}
