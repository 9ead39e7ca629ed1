/**
 * The provider-neutral stream driver: one POST per attempt, bounded SSE reading, in-band errors,
 * retries before any output, and cancellation from the caller's signal to the HTTP socket.
 *
 * Contract (what every provider module relies on):
 * - the generator never throws; it ends with exactly one `done` or `error` event;
 * - a failure (limit, malformed event, disconnect, abort) aborts the HTTP request, which cancels
 *   the body and closes the socket, before the `error` event is yielded;
 * - an attempt is retried only while nothing has been yielded to the caller;
 * - an attempt whose response sends no SSE event for `idleTimeoutMs` (default `IDLE_TIMEOUT_MS`: before its head, or
 *   between two events; comments alone, a proxy's heartbeat, do not count) is cut off and fails `stalledFailure`
 *   (retried like a connection failure while nothing was yielded; after output the stream ends with it, the text
 *   so far kept by the caller).
 */
import type { CredentialSource, ProviderBatch, ProviderEvent } from "../types.js";
import type { ProviderBounds } from "./accumulate.js";
import { BoundedSse } from "./bounded-sse.js";
import { codingsToUndo, decodeBody } from "./content-coding.js";
import { abortedFailure, connectFailure, errorCategory, isEventStream, LABELS, notStreamFailure, overflowStatus, ProviderFailure, stalledFailure, statusFailure, withCategory } from "./errors.js";

export type FetchLike = (url: string, init: RequestInit) => Promise<Response>;

/**
 * What the stream driver needs from an HTTP response. The global `fetch` Response satisfies it, and so does
 * the lighter node:http adapter (node-fetch.ts), which avoids loading undici on the turn path.
 */
export interface StreamResponse {
  readonly ok: boolean;
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  readonly body: {
    getReader(): { read(): Promise<{ done: true; value?: undefined } | { done: false; value: Uint8Array }> };
    cancel(): Promise<void>;
    /**
     * Optional: the caller has the whole answer (the decoder finished) but the body has not ended yet. Reads what
     * remains in the background, bounded, so a connection whose response ends returns to the keep-alive pool;
     * one that keeps sending is destroyed. Without it the driver aborts the request (the connection is lost).
     */
    release?(): void;
  } | null;
}

export interface StreamFetchInit {
  method: string;
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal;
  /** See `ProviderRequest.gate`; only passed to a fetch that declares `gated` (others are called after it). */
  gate?: Promise<void>;
}

/**
 * A fetch for provider streams. One that declares `gated: true` honours `init.gate` itself (it may connect and send
 * the head before, and sends the body's final bytes only after the gate resolves); any other is called only once
 * the gate resolved. One that declares `decodes: true` is a Fetch-standard fetch (a caller's `opts.fetch`, such as
 * the global one): it undoes the content codings it knows itself and keeps the `Content-Encoding` header, so the
 * driver decodes only what it left (content-coding.ts `codingsToUndo`).
 */
export type StreamFetch = ((url: string, init: StreamFetchInit) => Promise<StreamResponse>) & { readonly gated?: boolean; readonly decodes?: boolean };
export type Credential = Awaited<ReturnType<CredentialSource>>;

/** Retry policy for failures before any output. `sleep` must reject when `signal` aborts. */
export interface RetryPolicy {
  /** Total attempts including the first (1 = no retry). */
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A Retry-After / retry-after-ms longer than this is clamped to it. */
  maxRetryAfterMs: number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(abortedFailure());
      return;
    }
    const onAbort = (): void => {
      clearTimeout(t);
      reject(abortedFailure());
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 3,
  baseDelayMs: 250,
  maxDelayMs: 4000,
  maxRetryAfterMs: 10_000,
  sleep: abortableSleep,
};

/** Decodes one wire format's SSE events into provider events for one response. */
export interface WireDecoder {
  /** Handles one SSE event. Pushes caller events into `out`; throws `ProviderFailure`. Ignored once finished. */
  onEvent(event: string | undefined, data: string, out: ProviderEvent[]): void;
  /** True once the decoder pushed its terminal `done` (held tool calls, usage, then done). */
  readonly finished: boolean;
  /** Clean end of body before `finished`: push the terminal events or throw. */
  onEnd(out: ProviderEvent[]): void;
}

export interface WireRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface DriveParams {
  signal: AbortSignal;
  /** See `ProviderRequest.gate`. */
  gate?: Promise<void>;
  credentials: CredentialSource;
  /** Builds the HTTP request for one attempt from the current credential. */
  build(cred: Credential): WireRequest;
  decoder(): WireDecoder;
  fetch: StreamFetch;
  retry: RetryPolicy;
  bounds: ProviderBounds;
  /** How long a response may send nothing (ms); default `IDLE_TIMEOUT_MS`. */
  idleTimeoutMs?: number;
  now?: () => number;
}

/** A response silent this long is cut off (a provider's `stream_idle_timeout_ms` overrides it): 5 minutes. */
export const IDLE_TIMEOUT_MS = 300_000;

function toFailure(e: unknown, signal: AbortSignal): ProviderFailure {
  if (signal.aborted) return abortedFailure();
  if (e instanceof ProviderFailure) return e;
  // Any other exception is a bug or an unexpected shape; its text is never surfaced.
  return new ProviderFailure("protocol", LABELS.malformed, false);
}

/** Parses `retry-after-ms` or `retry-after` (seconds or HTTP date) into ms; undefined when absent/invalid. */
export function parseRetryAfter(headers: StreamResponse["headers"], now: number): number | undefined {
  const ms = headers.get("retry-after-ms");
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.ceil(Number(ms));
  const ra = headers.get("retry-after");
  if (ra === null) return undefined;
  const t = ra.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Math.ceil(Number(t) * 1000);
  const date = Date.parse(t);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

export function backoffDelay(policy: RetryPolicy, attempt: number, retryAfterMs: number | undefined): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, policy.maxRetryAfterMs);
  return Math.min(policy.baseDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
}

/** The most of an error body read to find its category; the rest is discarded unread. */
const MAX_ERROR_BODY_BYTES = 16 * 1024;

/**
 * Reads at most `MAX_ERROR_BODY_BYTES` of an error response for its category (errors.ts
 * `errorCategory`), then cancels the body. Only that identifier leaves this function: the body's
 * text never reaches the caller.
 */
async function errorBodyCategory(res: StreamResponse, fetchDecodes: boolean, signal: AbortSignal): Promise<string | undefined> {
  let category: string | undefined;
  let body = res.body;
  try {
    if (body !== null) {
      // A compressed (or transfer-coded) error body is decoded, bounded as decoded; one Berth cannot decode has no category.
      const codings = codingsToUndo(res.headers, fetchDecodes);
      if (codings.length > 0) body = await decodeBody(body, codings, signal);
      const reader = body.getReader();
      const chunks: Uint8Array[] = [];
      let n = 0;
      while (n <= MAX_ERROR_BODY_BYTES) {
        const r = await reader.read();
        if (r.done) break;
        chunks.push(r.value);
        n += r.value.byteLength;
      }
      if (n <= MAX_ERROR_BODY_BYTES) category = errorCategory(JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown, overflowStatus(res.status));
    }
  } catch {
    /* not JSON, cut off or aborted: no category */
  }
  try {
    await body?.cancel();
  } catch {
    /* already closed */
  }
  return category;
}

/**
 * Runs one provider stream, one event at a time. See the module contract. After the signal aborts, no further event
 * of an unsettled batch is yielded: the stream ends with the aborted error instead.
 */
export async function* driveStream(p: DriveParams): AsyncGenerator<ProviderEvent, void, undefined> {
  for await (const b of driveBatches(p)) {
    for (const ev of b.events) {
      if (!b.settled && p.signal.aborted) {
        yield abortedFailure().toEvent();
        return;
      }
      yield ev;
    }
  }
}

/**
 * Runs one provider stream as batches: the events decoded from one body chunk at a time (one `await` per chunk
 * instead of per event; a 64 KiB chunk holds hundreds of text deltas), except the stream's first output, which is
 * handed over alone before the rest of its chunk is decoded (first-token latency). Same contract as `driveStream`, which is
 * built on it; a consumer iterating batches itself must apply the abort rule of `ProviderBatch`.
 */
export async function* driveBatches(p: DriveParams): AsyncGenerator<ProviderBatch, void, undefined> {
  const { signal } = p;
  const now = p.now ?? Date.now;
  let yielded = false;
  // Registered before any fetch sees the gate, so this is set by the time a fetch fails because of it.
  let gateRejected = false;
  void p.gate?.catch(() => void (gateRejected = true));
  for (let attempt = 1; ; attempt++) {
    const ctl = new AbortController();
    const relay = (): void => ctl.abort();
    signal.addEventListener("abort", relay, { once: true });
    let settled = false;
    let failure: ProviderFailure;
    // Armed for the whole attempt, pushed back by every SSE event: a silent server is cut off (module contract).
    const idleMs = p.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    // Not while the consumer holds a batch (suspended at a `yield`: a slow client is not a silent server).
    let stalled = false;
    let consuming = false;
    let sse: BoundedSse | undefined;
    const idle = setTimeout(() => {
      if (consuming) return; // re-armed when the consumer resumes (`refresh` after each yield)
      stalled = true;
      ctl.abort();
    }, idleMs);
    idle.unref();
    try {
      if (signal.aborted) throw abortedFailure();
      let cred: Credential;
      try {
        cred = await p.credentials();
      } catch (e) {
        // A custom provider's unset key variable is named (a name from settings, never a value): "… (MY_API_KEY)".
        throw new ProviderFailure("auth", withCategory(LABELS.credential, (e as { missingEnv?: unknown } | null)?.missingEnv), false);
      }
      const wire = p.build(cred);
      const gate = p.gate;
      let res: StreamResponse;
      try {
        if (gate !== undefined && p.fetch.gated !== true) await gate;
        res = await p.fetch(wire.url, { method: "POST", headers: wire.headers, body: wire.body, signal: ctl.signal, ...(gate !== undefined ? { gate } : {}) });
      } catch (e) {
        // A failed gate is not retried: nothing may be sent once the caller's precondition failed.
        if (gateRejected) throw abortedFailure();
        throw signal.aborted ? abortedFailure() : connectFailure(e);
      }
      if (!res.ok) {
        const category = await errorBodyCategory(res, p.fetch.decodes === true, ctl.signal);
        if (signal.aborted) throw abortedFailure();
        throw statusFailure(res.status, parseRetryAfter(res.headers, now()), category);
      }
      if (res.body === null) throw new ProviderFailure("protocol", LABELS.malformed, false);
      // A web page is never a stream (a base_url naming a web UI or a login portal): refused before its body is read.
      const contentType = res.headers.get("content-type");
      if (/^\s*(?:text\/html|application\/xhtml\+xml)\s*(?:;|$)/i.test(contentType ?? "")) throw notStreamFailure(contentType);
      // A body compressed unasked (Berth sends no Accept-Encoding), or transfer-coded before its chunking, is decoded
      // before the SSE parser: every bound below counts decoded bytes (content-coding.ts). A Fetch-standard fetch
      // decoded the content codings it knows already.
      const codings = codingsToUndo(res.headers, p.fetch.decodes === true);
      const body = codings.length === 0 ? res.body : await decodeBody(res.body, codings, ctl.signal);
      const reader = body.getReader();
      const decoder = p.decoder();
      const out: ProviderEvent[] = [];
      // Any other body that is not declared an event stream and ends (or overflows an event) before one event was
      // decoded is named for what it is, not as a dropped connection or an oversized event.
      const notStream = (): boolean => !yielded && out.length === 0 && !isEventStream(contentType);
      sse = new BoundedSse(p.bounds, decoder, out);
      let eof = false;
      let seenEvents = 0;
      for (;;) {
        let r: Awaited<ReturnType<typeof reader.read>> | undefined;
        if (sse.held === "") {
          try {
            r = await reader.read();
          } catch (e) {
            // The connection's own code (`ECONNRESET`, a malformed chunk's `HTTP_BAD_RESPONSE`) names the cause; a
            // compressed body's decoding failure is already a provider failure.
            if (signal.aborted) throw abortedFailure();
            throw e instanceof ProviderFailure ? e : new ProviderFailure("network", withCategory(LABELS.disconnect, (e as { code?: unknown } | null)?.code), true);
          }
        }
        let failed: ProviderFailure | undefined;
        try {
          if (r === undefined) {
            sse.resume();
          } else if (r.done) {
            eof = true;
            sse.end();
            if (!decoder.finished) decoder.onEnd(out);
          } else {
            // Until the stream's first output, the rest of its chunk waits for it (below).
            sse.push(r.value, !yielded);
          }
        } catch (e) {
          const overflow = e instanceof ProviderFailure && e.kind === "limit";
          failed = !signal.aborted && (eof || overflow) && notStream() ? notStreamFailure(contentType) : toFailure(e, signal);
        }
        // Only an event is progress: a chunk of comments (or of an event still incomplete) leaves the clock running.
        if (sse.events !== seenEvents) {
          seenEvents = sse.events;
          idle.refresh();
        }
        if (failed !== undefined) {
          // Cancel the body first, then hand over what was decoded before the failure.
          ctl.abort();
          if (out.length > 0) {
            yielded = true;
            consuming = true;
            yield { events: out.splice(0), settled: true };
          }
          throw failed;
        }
        if (sse.held !== "") {
          // The stream's first output, handed over before the rest of its chunk is decoded (a 64 KiB chunk holds
          // hundreds of deltas): the doors write a turn's first delta at once (first-token latency).
          if (signal.aborted) throw abortedFailure();
          yielded = true;
          consuming = true;
          yield { events: out.splice(0), settled: false };
          consuming = false;
          idle.refresh();
          continue;
        }
        if (decoder.finished) {
          // Terminal reached: release the connection now rather than when the caller stops iterating (back to the
          // keep-alive pool once the response ends, so the next turn does not connect again; aborted otherwise).
          if (!eof) {
            if (body.release !== undefined) body.release();
            else ctl.abort();
          }
          settled = true;
        } else if (eof) {
          throw notStream() ? notStreamFailure(contentType) : new ProviderFailure("network", LABELS.disconnect, true);
        }
        if (signal.aborted && !settled) throw abortedFailure();
        if (out.length > 0) {
          yielded = true;
          consuming = true;
          yield { events: out.splice(0), settled };
          consuming = false;
          idle.refresh();
        }
        if (settled) return;
      }
    } catch (e) {
      failure = stalled && !signal.aborted ? stalledFailure(idleMs, (sse?.commentsSinceEvent ?? 0) > 0) : toFailure(e, signal);
    } finally {
      clearTimeout(idle);
      signal.removeEventListener("abort", relay);
      if (!settled) ctl.abort();
    }
    if (failure.retryable && !yielded && attempt < p.retry.maxAttempts) {
      try {
        await p.retry.sleep(backoffDelay(p.retry, attempt, failure.retryAfterMs), signal);
      } catch {
        yield { events: [abortedFailure().toEvent()], settled: true };
        return;
      }
      if (!signal.aborted) continue;
      yield { events: [abortedFailure().toEvent()], settled: true };
      return;
    }
    // A retried failure says so: the caller sees one error for several requests.
    yield { events: [(attempt > 1 ? failure.afterAttempts(attempt) : failure).toEvent()], settled: true };
    return;
  }
}
