/**
 * Content codings of a provider's response body (RFC 9110 §8.4). Berth sends no `Accept-Encoding`, which allows any
 * coding, so a server or a corporate proxy may compress the event stream (or an error body) unasked.
 *
 * Contract:
 * - `contentCodings` reads the `Content-Encoding` header: absent or `identity` is no coding (the body as is);
 *   `gzip` / `x-gzip`, `deflate` (zlib-wrapped, as HTTP defines it, or raw as some servers send it: deflate.ts) and
 *   `br` are decoded; any other coding, or more
 *   than `MAX_CODINGS` stacked, throws a `protocol` failure naming it (never retried: the same request gets the same
 *   answer).
 * - `transferCodings` reads `Transfer-Encoding` the same way for the codings applied before the final `chunked` (or
 *   on a body read until the server closes): `gzip` / `x-gzip` and `deflate` (RFC 9112 §7) are decoded after the
 *   chunking is removed, exactly as content codings are; any other is refused naming it (`codingsToUndo` joins both,
 *   at most `MAX_CODINGS` in all).
 * - `decodeBody` wraps a body so that `read()` yields decoded bytes, with node:zlib's streaming decompressors. node:zlib
 *   loads with the first compressed response, never before (a fresh process's first turn does not pay for it:
 *   docs/runtime.md, "First turn of a fresh process").
 * - Everything the driver bounds (event and response sizes, the idle clock) it counts on the decoded bytes. The
 *   decompressors run only while the driver reads: a decoded chunk not yet read stops them (zlib stops inflating when
 *   its output buffer is full) and the raw body is read only while the decompressor takes input. So a small body that
 *   inflates without end holds a few 16 KiB chunks at a time until the response bound fails the stream.
 * - A decompressor's error fails `read()` with a `ProviderFailure`, after the bytes decoded before it: a compressed
 *   stream cut short (the body ended cleanly inside it) is `network` and retried like a body ending early; a corrupt
 *   one is `protocol`. A failure of the raw body (a reset, an abort) fails `read()` with that same error.
 */
import type { Transform } from "node:stream";
import type * as Zlib from "node:zlib";
import type { StreamResponse } from "./driver.js";
import { LABELS, ProviderFailure, safeCategory } from "./errors.js";

type Body = NonNullable<StreamResponse["body"]>;
type Reader = ReturnType<Body["getReader"]>;
type ReadResult = Awaited<ReturnType<Reader["read"]>>;

/** A coding Berth decodes (`x-gzip` is read as `gzip`). */
export type Coding = "gzip" | "deflate" | "br";

/**
 * The most codings one response may stack, content and transfer codings together (`gzip, br`): real servers send
 * one; more is refused, not decoded.
 */
const MAX_CODINGS = 2;

/** The codings applied to a body, in the order applied (`[]`: none). Throws a `protocol` failure for any other. */
export function contentCodings(header: string | null): Coding[] {
  if (header === null) return [];
  const out: Coding[] = [];
  for (const part of header.split(",")) {
    const c = part.trim().toLowerCase();
    if (c === "" || c === "identity") continue;
    if (c === "gzip" || c === "x-gzip") out.push("gzip");
    else if (c === "deflate" || c === "br") out.push(c);
    // The coding's name is an HTTP token the server chose: named when it is an identifier (`compress`, `zstd`).
    else throw new ProviderFailure("protocol", `${LABELS.contentCoding} (${safeCategory(c) ?? "an unnamed coding"})`, false);
  }
  if (out.length > MAX_CODINGS) throw new ProviderFailure("protocol", `${LABELS.contentCoding} (${out.length} stacked codings)`, false);
  return out;
}

/**
 * The codings a Fetch-standard fetch undoes itself (its "handle content codings" step: undici, as Node's global
 * `fetch`, and browsers). As undici does, it decodes a body only when it knows every coding listed; else (`compress`,
 * `identity` in a list, an empty entry) it hands the body over as received.
 */
const FETCH_DECODES = new Set(["gzip", "x-gzip", "deflate", "br"]);

/**
 * The transfer codings applied to a body besides `chunked` (RFC 9112 §7), in the order applied (`[]`: none).
 * `chunked` as the last coding is the framing (http1.ts removes it; so does any fetch) and `identity` is none; `gzip`
 * / `x-gzip` and `deflate` (the registered compressions) are decoded; `chunked` anywhere else, or any other coding,
 * throws a `protocol` failure naming it.
 */
export function transferCodings(header: string | null): Coding[] {
  if (header === null) return [];
  const parts = header.split(",").map((p) => p.trim().toLowerCase());
  const out: Coding[] = [];
  parts.forEach((c, i) => {
    if (c === "" || c === "identity" || (c === "chunked" && i === parts.length - 1)) return;
    if (c === "gzip" || c === "x-gzip") out.push("gzip");
    else if (c === "deflate") out.push("deflate");
    else {
      const name = c === "chunked" ? "chunked not last" : (safeCategory(c) ?? "an unnamed coding");
      throw new ProviderFailure("protocol", `${LABELS.transferCoding} (${name})`, false);
    }
  });
  return out;
}

/**
 * The codings Berth must undo on a response's body, in the order applied: its content codings (`contentCodings`;
 * none when `fetchDecodes`, the body came from a Fetch-standard fetch, driver.ts `StreamFetch.decodes`, and that fetch
 * decoded them already), then its transfer codings (`transferCodings`; no fetch undoes those). At most `MAX_CODINGS`
 * in all. Throws as those do, or naming the count.
 */
export function codingsToUndo(headers: { get(name: string): string | null }, fetchDecodes: boolean): Coding[] {
  const ce = headers.get("content-encoding");
  const fetched = fetchDecodes && ce !== null && ce.split(",").every((c) => FETCH_DECODES.has(c.trim().toLowerCase()));
  const content = fetched ? [] : contentCodings(ce);
  const transfer = transferCodings(headers.get("transfer-encoding"));
  if (transfer.length === 0) return content;
  const all = [...content, ...transfer];
  if (all.length > MAX_CODINGS) throw new ProviderFailure("protocol", `${LABELS.transferCoding} (${all.length} stacked codings)`, false);
  return all;
}

let zlib: typeof Zlib | null = null;

/**
 * `body` decoded from `codings` (see the module contract). Aborting `signal` (the attempt's own) stops the
 * decompressors; the raw body's owner cancels it.
 */
export async function decodeBody(body: Body, codings: readonly Coding[], signal: AbortSignal): Promise<Body> {
  const z = (zlib ??= await import("node:zlib"));
  // `deflate` zlib-wrapped or raw (deflate.ts), loaded with the first such body.
  const inflate = codings.includes("deflate") ? (await import("./deflate.js")).autoInflate : null;
  // Applied first, undone last.
  const order = [...codings].reverse();
  const stages = order.map((c) => (c === "gzip" ? z.createGunzip() : c === "deflate" ? inflate!(z) : z.createBrotliDecompress()));
  return new DecodedBody(body, stages, order, signal);
}

/** A decompressor's error as a provider failure naming the coding and zlib's code. */
function decodeFailure(coding: Coding, e: unknown): ProviderFailure {
  const code = safeCategory((e as { code?: unknown } | null)?.code);
  const detail = `${coding}${code === undefined ? "" : ` ${code}`}` as const;
  // zlib says `Z_BUF_ERROR` ("unexpected end of file") only when its input ended inside the compressed stream.
  if (code === "Z_BUF_ERROR") return new ProviderFailure("network", `${LABELS.compressedTruncated} (${detail})`, true);
  return new ProviderFailure("protocol", `${LABELS.compressedCorrupt} (${detail})`, false);
}

/** Resolves once `s` takes input again, or is closed. */
function drained(s: Transform): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      s.off("drain", done).off("close", done);
      resolve();
    };
    s.on("drain", done).on("close", done);
  });
}

class DecodedBody implements Body {
  private readonly source: Reader;
  private readonly first: Transform;
  private readonly last: Transform;
  private failure: Error | null = null;
  private ended = false;
  /** Cancelled, released or aborted: nothing more is decoded or handed over. */
  private closed = false;
  private waiter: { resolve: (r: ReadResult) => void; reject: (e: Error) => void } | null = null;
  private readonly onAbort = (): void => this.shut();

  constructor(
    private readonly raw: Body,
    private readonly stages: Transform[],
    codings: Coding[],
    private readonly signal: AbortSignal,
  ) {
    this.source = raw.getReader();
    this.first = stages[0]!;
    this.last = stages[stages.length - 1]!;
    stages.forEach((s, i) => {
      s.on("error", (e) => this.fail(decodeFailure(codings[i]!, e)));
      if (i > 0) stages[i - 1]!.pipe(s);
    });
    this.last.on("readable", () => this.wake()).on("end", () => {
      this.ended = true;
      this.wake();
    });
    if (signal.aborted) this.shut();
    else {
      signal.addEventListener("abort", this.onAbort, { once: true });
      void this.pump();
    }
  }

  getReader(): Reader {
    return { read: () => this.read() };
  }

  cancel(): Promise<void> {
    this.shut();
    return this.raw.cancel();
  }

  /** The caller has its answer: the raw body's rest is read in the background (or cancelled), not decoded. */
  release(): void {
    this.shut();
    if (this.raw.release !== undefined) this.raw.release();
    else void this.raw.cancel().catch(() => undefined);
  }

  private read(): Promise<ReadResult> {
    const value = this.take();
    if (value !== null) return Promise.resolve({ done: false, value });
    if (this.failure !== null) return Promise.reject(this.failed());
    if (this.ended || this.closed) return Promise.resolve({ done: true });
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** Decoded bytes not read yet (those decoded before a failure included), or null. */
  private take(): Buffer | null {
    return this.closed ? null : (this.last.read() as Buffer | null);
  }

  private wake(): void {
    const w = this.waiter;
    if (w === null) return;
    const value = this.take();
    if (value === null && this.failure === null && !this.ended && !this.closed) return;
    this.waiter = null;
    if (value !== null) w.resolve({ done: false, value });
    else if (this.failure !== null) w.reject(this.failed());
    else w.resolve({ done: true });
  }

  /** Feeds the raw body to the first decompressor while it takes input (backpressure bounds what is held). */
  private async pump(): Promise<void> {
    try {
      for (;;) {
        const r = await this.source.read();
        if (this.closed || this.failure !== null) return;
        if (r.done) {
          this.first.end();
          return;
        }
        if (!this.first.write(r.value)) await drained(this.first);
        if (this.closed || this.failure !== null) return;
      }
    } catch (e) {
      this.fail(e);
    }
  }

  /** The failure, once every byte decoded before it was handed over: the last decompressor goes too. */
  private failed(): Error {
    this.last.destroy();
    return this.failure!;
  }

  private fail(e: unknown): void {
    if (this.failure !== null || this.closed) return;
    this.failure = e instanceof Error ? e : new Error("the response body failed");
    this.signal.removeEventListener("abort", this.onAbort);
    // A decompressor's failure leaves the raw body unread: cancelled (a failed raw body is closed already).
    if (e instanceof ProviderFailure) void this.raw.cancel().catch(() => undefined);
    for (const s of this.stages) if (s !== this.last) s.destroy();
    this.wake();
  }

  private shut(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal.removeEventListener("abort", this.onAbort);
    for (const s of this.stages) s.destroy();
    this.wake();
  }
}
