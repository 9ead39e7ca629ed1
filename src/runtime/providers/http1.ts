/**
 * One HTTP/1.1 request and its streamed response over a socket (net or TLS, connected or still connecting), for
 * provider streams (node-fetch.ts owns the connections: pool, spare, TLS, proxy tunnel).
 *
 * Why not node:http: on a fresh process its first request was the largest piece of the first turn's own work
 * (loading node:http ~1.8 ms, the first `ClientRequest` and response ~2–4 ms more, then one stream `data` event and
 * one async-iterator step per HTTP chunk: a provider sends one chunk per delta). A provider request is one POST
 * with a known body and a response read once, so the protocol needed is small (docs/providers.md, "HTTP client").
 *
 * Contract:
 * - `requestHead` builds the request head: `Host` (the request's own unless the headers name one), the headers
 *   (names are tokens, values without CR, LF or NUL, or it throws `ERR_INVALID_HTTP_TOKEN` / `ERR_INVALID_CHAR`
 *   naming the header, never its value; a later name wins over an earlier one differing in case only, as
 *   node:http does), `Content-Length`, `Connection: keep-alive`. A caller's `content-length`,
 *   `transfer-encoding` and `connection` are replaced.
 * - `Exchange` writes nothing itself (node-fetch.ts writes the request); it reads the response from the socket's
 *   data. The head: `HTTP/1.0` or `HTTP/1.1`, a status, header lines (`name: value`); interim 1xx answers are
 *   skipped; at most `MAX_HEAD_BYTES` in all, else `HTTP_HEAD_TOO_LARGE`; anything else malformed is
 *   `HTTP_BAD_RESPONSE`. The body: chunked when the last transfer coding is `chunked` (chunk size lines ≤ 1 KiB,
 *   trailers ≤ 16 KiB, both skipped), else `Content-Length` (one value, digits), else until the server closes;
 *   none for 204 and 304. Only the chunking is removed: any other transfer coding (`gzip, chunked`) stays on the
 *   body, and its `Transfer-Encoding` in the head, for the driver to decode or refuse (content-coding.ts).
 * - The body is read as it arrives, coalesced: one `read()` returns every byte received since the last one (a
 *   socket read holding many chunks is one value). Past `PAUSE_BYTES` unread the socket is paused until the next
 *   `read()`. A connection closed or failing before the response is complete rejects the pending or next `read()`
 *   (`ECONNRESET` "socket hang up" before the head, as node:http says it).
 * - `onDone(reusable)` runs once when the exchange ends: complete (reusable when HTTP/1.1, no `Connection: close`,
 *   length-delimited, nothing more received and `requestComplete` set) or failed/aborted (false; the socket is
 *   destroyed). The exchange's socket listeners are removed before it runs, so the owner may pool the socket.
 */
import type { Socket } from "node:net";

/** The most a response head may hold, interim 1xx heads included. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** The longest chunk size line (extensions included) and the most trailer bytes. */
const MAX_CHUNK_LINE_BYTES = 1024;
const MAX_TRAILER_BYTES = 16 * 1024;
/** Unread body bytes past which the socket is paused. */
export const PAUSE_BYTES = 64 * 1024;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [^\r\n]*)?$/;
const CHUNK_SIZE = /^([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\x00-\x08\x0a-\x1f\x7f]*)?$/;
const REPLACED = new Set(["content-length", "transfer-encoding", "connection"]);

const coded = (code: string, message: string): Error => Object.assign(new Error(message), { code });
const headTooLarge = (): Error => coded("HTTP_HEAD_TOO_LARGE", `the response head is larger than ${MAX_HEAD_BYTES} bytes`);

/**
 * The request head of a POST of `length` body bytes to `path` on `hostHeader` (`host[:port]`, IPv6 in brackets).
 * Throws on a header name or value node:http would refuse (see the module contract).
 */
export function requestHead(method: string, path: string, hostHeader: string, headers: Record<string, string>, length: number): string {
  const byName = new Map<string, [string, string]>();
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name)) throw coded("ERR_INVALID_HTTP_TOKEN", `header name must be a valid HTTP token: ${JSON.stringify(name.slice(0, 64))}`);
    if (!FIELD_VALUE.test(value)) throw coded("ERR_INVALID_CHAR", `invalid character in the value of header ${JSON.stringify(name)}`);
    const key = name.toLowerCase();
    if (REPLACED.has(key)) continue;
    byName.delete(key); // a later spelling replaces an earlier one, in its own place
    byName.set(key, [name, value]);
  }
  let head = `${method} ${path} HTTP/1.1\r\n`;
  if (!byName.has("host")) head += `Host: ${hostHeader}\r\n`;
  for (const [name, value] of byName.values()) head += `${name}: ${value}\r\n`;
  return `${head}Content-Length: ${length}\r\nConnection: keep-alive\r\n\r\n`;
}

/** A parsed response head. */
export interface ResponseHead {
  status: number;
  /** Lower-case names; repeated fields joined with ", ". */
  headers: Map<string, string>;
}

type Framing = "chunked" | "length" | "close" | "none";
type ReadResult = { done: true; value?: undefined } | { done: false; value: Uint8Array };

export class Exchange {
  private phase: "head" | "body" | "done" = "head";
  private failure: Error | null = null;
  /**
   * Unparsed bytes of a chunk size / CRLF / trailer line; in the head, the last bytes received (where the end of an
   * incomplete head is looked for), the head's bytes so far being `headParts` (`headPending` bytes).
   */
  private partial: Buffer | null = null;
  private headParts: Buffer[] = [];
  private headPending = 0;
  private headBytes = 0;
  private framing: Framing = "close";
  private keepAlive = false;
  /** The server's `Keep-Alive: timeout=N`, in ms. */
  private keepAliveMs: number | undefined;
  /** Chunked: where the decoder is; length: bytes still due (also the current chunk's). */
  private chunk: "size" | "data" | "crlf" | "trailer" = "size";
  private remaining = 0;
  private trailerBytes = 0;
  private queue: Buffer[] = [];
  private queued = 0;
  private paused = false;
  private waiter: { resolve: (r: ReadResult) => void; reject: (e: Error) => void } | null = null;
  /** Set by `release`: the rest of the body is read and dropped, at most `discardMax` bytes. */
  private discardMax = -1;
  private discarded = 0;
  private readonly onData = (b: Buffer): void => this.receive(b);
  private readonly onEnd = (): void => this.closed();
  private readonly onError = (e: Error): void => this.fail(e);
  /** Set by the owner once the whole request was written (a socket is pooled only after a complete request). */
  requestComplete = false;

  constructor(
    readonly socket: Socket,
    private readonly onHead: (head: ResponseHead) => void,
    private readonly onDone: (reusable: boolean, keepAliveMs: number | undefined) => void,
    private readonly onHeadFailure: (e: Error) => void,
  ) {
    socket.on("data", this.onData).on("end", this.onEnd).on("close", this.onEnd).on("error", this.onError);
  }

  /** Ends the exchange with `e` (abort, or the owner's failure to write): the socket is destroyed. */
  fail(e: Error): void {
    if (this.phase === "done" || this.failure !== null) return;
    this.failure = e;
    this.detach();
    this.socket.destroy();
    if (this.phase === "head") this.onHeadFailure(e);
    else if (this.waiter !== null) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(e);
    }
    this.onDone(false, undefined);
  }

  read(): Promise<ReadResult> {
    if (this.queued > 0) {
      const value = this.queue.length === 1 ? this.queue[0]! : Buffer.concat(this.queue, this.queued);
      this.queue = [];
      this.queued = 0;
      if (this.paused) {
        this.paused = false;
        if (this.failure === null && this.phase !== "done") this.socket.resume();
      }
      return Promise.resolve({ done: false, value });
    }
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.phase === "done") return Promise.resolve({ done: true });
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** The caller stops reading: a complete response keeps its connection; else the socket is destroyed. */
  cancel(): void {
    this.queue = [];
    this.queued = 0;
    if (this.phase !== "done") this.fail(coded("ABORT_ERR", "This operation was aborted"));
  }

  /** The caller has what it needs: the rest is read in the background and dropped (at most `maxBytes`). */
  release(maxBytes: number): void {
    this.queue = [];
    this.queued = 0;
    if (this.phase === "done" || this.failure !== null) return;
    this.discardMax = maxBytes;
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
  }

  get finished(): boolean {
    return this.phase === "done" || this.failure !== null;
  }

  private detach(): void {
    this.socket.off("data", this.onData).off("end", this.onEnd).off("close", this.onEnd).off("error", this.onError);
  }

  private closed(): void {
    if (this.phase === "body" && this.framing === "close") return this.complete(false);
    this.fail(coded("ECONNRESET", this.phase === "head" ? "socket hang up" : "the connection closed before the response ended"));
  }

  private complete(reusable: boolean): void {
    this.phase = "done";
    this.detach();
    const pool = reusable && this.keepAlive && this.requestComplete;
    if (!pool) this.socket.destroy();
    else if (this.paused) this.socket.resume(); // an idle pooled connection must see its server close it
    if (this.waiter !== null && this.queued === 0) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ done: true });
    }
    this.onDone(pool, this.keepAliveMs);
  }

  private push(b: Buffer): void {
    if (b.length === 0) return;
    if (this.discardMax >= 0) {
      this.discarded += b.length;
      if (this.discarded > this.discardMax) this.fail(coded("ERR_RESPONSE_TOO_LONG", "the response went on after its answer"));
      return;
    }
    if (this.waiter !== null) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve({ done: false, value: b });
      return;
    }
    this.queue.push(b);
    this.queued += b.length;
    if (!this.paused && this.queued > PAUSE_BYTES) {
      this.paused = true;
      this.socket.pause();
    }
  }

  private receive(b: Buffer): void {
    if (this.failure !== null || this.phase === "done") return;
    try {
      if (this.phase === "head") {
        if (this.partial !== null) {
          // Joined only once the head can be complete: a head trickling in byte by byte costs linear time.
          const probe = Buffer.concat([this.partial.subarray(Math.max(0, this.partial.length - 3)), b]);
          if (probe.indexOf("\r\n\r\n", 0, "latin1") < 0) {
            this.headParts.push(b);
            this.headPending += b.length;
            if (this.headBytes + this.headPending > MAX_HEAD_BYTES) throw headTooLarge();
            this.partial = probe;
            return;
          }
          b = Buffer.concat([...this.headParts, b]);
          this.headParts = [];
          this.partial = null;
        }
        const rest = this.parseHeads(b);
        if (rest === null || this.failure !== null) return;
        b = rest;
      }
      this.body(b);
    } catch (e) {
      this.fail(e as Error);
    }
  }

  /** Parses heads from `b` (1xx skipped); the bytes after the final head, or null while it is incomplete. */
  private parseHeads(b: Buffer): Buffer | null {
    for (;;) {
      const end = b.indexOf("\r\n\r\n", 0, "latin1");
      if (end < 0) {
        if (this.headBytes + b.length > MAX_HEAD_BYTES) throw headTooLarge();
        this.headParts = [b];
        this.headPending = b.length;
        this.partial = b;
        return null;
      }
      this.headBytes += end + 4;
      if (this.headBytes > MAX_HEAD_BYTES) throw headTooLarge();
      const head = parseHead(b.toString("latin1", 0, end));
      b = b.subarray(end + 4);
      if (head.status < 200) {
        if (head.status === 101) throw coded("HTTP_BAD_RESPONSE", "the server switched protocols");
        continue; // interim answer (100 Continue, 103 Early Hints)
      }
      this.start(head.version, head);
      return b;
    }
  }

  private start(version: string, head: ResponseHead): void {
    const h = head.headers;
    const te = h.get("transfer-encoding");
    const cl = h.get("content-length");
    const connection = (h.get("connection") ?? "").toLowerCase();
    this.keepAlive = version === "1" && !/(?:^|,)\s*close\s*(?:,|$)/.test(connection);
    if (head.status === 204 || head.status === 304) this.framing = "none";
    else if (te !== undefined) {
      this.framing = te.split(",").pop()!.trim().toLowerCase() === "chunked" ? "chunked" : "close";
      if (cl !== undefined) this.keepAlive = false; // both framings named: trust neither for reuse
    } else if (cl !== undefined) {
      const values = new Set(cl.split(",").map((v) => v.trim()));
      const only = values.size === 1 ? [...values][0]! : "";
      if (!/^\d{1,15}$/.test(only)) throw coded("HTTP_BAD_RESPONSE", "the response has an invalid Content-Length");
      this.framing = "length";
      this.remaining = Number(only);
    } else this.framing = "close";
    if (this.framing === "close") this.keepAlive = false;
    const hint = /(?:^|[\s,])timeout=(\d{1,6})/i.exec(h.get("keep-alive") ?? "")?.[1];
    if (hint !== undefined) this.keepAliveMs = Number(hint) * 1000;
    this.phase = "body";
    this.onHead(head);
  }

  /** Body bytes (right after the head: possibly none). Bytes past a complete response: never reused. */
  private body(b: Buffer): void {
    // No body, or an empty one: complete as soon as the head is (called once, with the bytes after it).
    if (this.framing === "none" || (this.framing === "length" && this.remaining === 0)) return this.complete(b.length === 0);
    if (this.framing === "close") return this.push(b);
    if (this.framing === "length") {
      const take = Math.min(this.remaining, b.length);
      this.push(b.subarray(0, take));
      this.remaining -= take;
      if (this.remaining === 0 && this.phase === "body" && this.failure === null) this.complete(take === b.length);
      return;
    }
    this.chunked(b);
  }

  private chunked(b: Buffer): void {
    let p = 0;
    while (p < b.length && this.failure === null) {
      if (this.chunk === "data") {
        const take = Math.min(this.remaining, b.length - p);
        this.push(b.subarray(p, p + take));
        p += take;
        this.remaining -= take;
        if (this.remaining === 0) this.chunk = "crlf";
        continue;
      }
      const nl = b.indexOf(10, p);
      const limit = this.chunk === "trailer" ? MAX_TRAILER_BYTES - this.trailerBytes : MAX_CHUNK_LINE_BYTES;
      if (nl < 0) {
        const part = b.subarray(p);
        this.partial = this.partial === null ? part : Buffer.concat([this.partial, part]);
        if (this.partial.length > limit) throw coded("HTTP_BAD_RESPONSE", "the response's chunk framing is malformed (a line too long)");
        return;
      }
      const line = this.partial === null ? b.subarray(p, nl) : Buffer.concat([this.partial, b.subarray(p, nl)]);
      this.partial = null;
      p = nl + 1;
      if (line.length > limit || line.length === 0 || line[line.length - 1] !== 13) throw coded("HTTP_BAD_RESPONSE", "the response's chunk framing is malformed");
      const text = line.toString("latin1", 0, line.length - 1);
      if (this.chunk === "crlf") {
        if (text !== "") throw coded("HTTP_BAD_RESPONSE", "the response's chunk framing is malformed (no line end after a chunk)");
        this.chunk = "size";
      } else if (this.chunk === "size") {
        const m = CHUNK_SIZE.exec(text);
        if (m === null) throw coded("HTTP_BAD_RESPONSE", "the response's chunk framing is malformed (a bad chunk size)");
        const size = parseInt(m[1]!, 16);
        if (size === 0) this.chunk = "trailer";
        else {
          this.remaining = size;
          this.chunk = "data";
        }
      } else if (text === "") {
        return this.complete(p === b.length);
      } else this.trailerBytes += line.length + 1;
    }
  }
}

/** Parses one head's text (no final blank line). */
function parseHead(text: string): ResponseHead & { version: string } {
  const lines = text.split("\r\n");
  const m = STATUS_LINE.exec(lines[0]!);
  if (m === null) throw coded("HTTP_BAD_RESPONSE", "the server's answer is not an HTTP/1.x response");
  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const k = line.indexOf(":");
    const name = k > 0 ? line.slice(0, k) : "";
    if (!TOKEN.test(name) || line.includes("\n") || line.includes("\r")) throw coded("HTTP_BAD_RESPONSE", "the response has a malformed header line");
    const value = line.slice(k + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    const key = name.toLowerCase();
    const had = headers.get(key);
    headers.set(key, had === undefined ? value : `${had}, ${value}`);
  }
  return { version: m[1]!, status: Number(m[2]), headers };
}
