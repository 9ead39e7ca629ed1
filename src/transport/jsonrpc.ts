/**
 * A small JSON-RPC 2.0 connection over any message transport (one JSON text per message: a WebSocket frame, or
 * a line of `jsonl.ts` framing). Used by the host's AHP side and the ACP agent. Contracts:
 * - `receive(text)` handles one incoming message: a request (answered exactly once, with the handler's result
 *   or an error object), a notification (never answered), or a response to one of our `request`s.
 *   Malformed input gets the standard errors, each message naming the fault and the fix (`envelopeFault`): parse
 *   error (-32700, id null) and invalid request (-32600, with the message's id when it has a usable one). A batch (a
 *   JSON array) is not served: it is one invalid request. An id is a string or a number JSON can carry exactly
 *   (at most 2^53 - 1 in magnitude): a larger one would be answered under another number. Params are by name: a
 *   request whose `params` is present and not an object (`null` counts as absent) is answered -32602 without
 *   running; such a notification is dropped. A response (`result` or `error`, no `method`) is never answered: one
 *   whose id matches no pending request (an unknown id, an id-null error) is ignored.
 * - The handler may return a value (answered in the same step: nothing is sent in between) or a promise.
 *   A thrown `JsonRpcError` becomes its error object; anything else goes through `errorOf` (default: -32603
 *   "internal error"; never an exception's text).
 * - `request` resolves with the peer's result or rejects with a `JsonRpcError`; `close(reason)` rejects every
 *   pending request and later calls (idempotent). `signal` abort sends nothing (the caller cancels by its
 *   protocol's own means) and rejects the call.
 */

export type JsonRpcId = string | number;
type Obj = Record<string, unknown>;

export const JSONRPC_ERRORS = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
} as const;

export class JsonRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "JsonRpcError";
  }
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface JsonRpcHandlers {
  /** A request (`notification` false) or notification. Params default to `{}`. */
  onRequest(method: string, params: Obj, notification: boolean): unknown;
  /** Maps a thrown value that is not a `JsonRpcError` to the error object sent. */
  errorOf?(e: unknown, method: string): JsonRpcErrorObject;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is JsonRpcId => typeof v === "string" || (typeof v === "number" && Math.abs(v) <= Number.MAX_SAFE_INTEGER);
const kind = (v: unknown): string => (v === null ? "null" : Array.isArray(v) ? "a list" : typeof v === "object" ? "an object" : `a ${typeof v}`);

/** Why `msg` (parsed JSON) is not a request, notification or response; null when it is one. Fixed text, never input. */
function envelopeFault(msg: unknown): string | null {
  if (Array.isArray(msg)) return "a batch (a JSON array of messages) is not served: send each JSON-RPC message by itself";
  if (!isObj(msg)) return `a JSON-RPC message must be a JSON object, not ${kind(msg)}`;
  if (msg.jsonrpc !== "2.0") return 'jsonrpc must be "2.0" (JSON-RPC 2.0)';
  if ("id" in msg && msg.id !== undefined && !isId(msg.id))
    return `id must be a string or a number of at most 2^53 - 1 in magnitude (absent for a notification; null is reserved for errors), not ${typeof msg.id === "number" ? "a larger number" : kind(msg.id)}`;
  if (typeof msg.method !== "string" || msg.method === "") return "method must be a non-empty string (a request or notification names the method it calls)";
  return null;
}
/** A method name as an error message may quote it: at most 64 characters. */
const methodName = (m: string): string => (m.length > 64 ? `${m.slice(0, 64)}…` : m);

export class JsonRpcConnection {
  private readonly pending = new Map<JsonRpcId, Pending>();
  private nextId = 1;
  private closedWith: Error | null = null;

  constructor(
    private readonly send: (text: string) => void,
    private readonly handlers: JsonRpcHandlers,
  ) {}

  private write(msg: Obj): void {
    if (this.closedWith === null) this.send(JSON.stringify(msg));
  }

  private errorObject(e: unknown, method: string): JsonRpcErrorObject {
    if (e instanceof JsonRpcError) return { code: e.code, message: e.message, ...(e.data !== undefined ? { data: e.data } : {}) };
    return this.handlers.errorOf?.(e, method) ?? { code: JSONRPC_ERRORS.InternalError, message: "internal error" };
  }

  /** Handles one incoming message (never rejects). */
  async receive(text: string): Promise<void> {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return this.write({ jsonrpc: "2.0", id: null, error: { code: JSONRPC_ERRORS.ParseError, message: "parse error: the message is not JSON text" } });
    }
    if (isObj(msg) && msg.method === undefined && ("result" in msg || "error" in msg)) {
      // A response is never answered: two connections would trade errors for ever. One that matches no request
      // (an id-null error: the peer could not read something sent to it) settles nothing and is dropped.
      if (msg.jsonrpc === "2.0" && isId(msg.id)) this.onResponse(msg);
      return;
    }
    const id = isObj(msg) && isId(msg.id) ? msg.id : undefined;
    const fault = envelopeFault(msg);
    if (fault !== null) return this.write({ jsonrpc: "2.0", id: id ?? null, error: { code: JSONRPC_ERRORS.InvalidRequest, message: fault } });
    const m = msg as Obj & { method: string };
    const method = m.method;
    if (m.params !== undefined && m.params !== null && !isObj(m.params)) {
      if (id === undefined) return;
      const message = `${methodName(method)}: params must be an object of named parameters, or absent; not ${kind(m.params)}`;
      return this.write({ jsonrpc: "2.0", id, error: { code: JSONRPC_ERRORS.InvalidParams, message } });
    }
    const params = isObj(m.params) ? m.params : {};
    try {
      const out = this.handlers.onRequest(method, params, id === undefined);
      const result = out instanceof Promise ? ((await out) as unknown) : out;
      if (id !== undefined) this.write({ jsonrpc: "2.0", id, result: result ?? null });
    } catch (e) {
      if (id !== undefined) this.write({ jsonrpc: "2.0", id, error: this.errorObject(e, method) });
    }
  }

  private onResponse(msg: Obj): void {
    const p = this.pending.get(msg.id as JsonRpcId);
    if (p === undefined) return;
    this.pending.delete(msg.id as JsonRpcId);
    if ("error" in msg) {
      const e = isObj(msg.error) ? msg.error : {};
      p.reject(new JsonRpcError(typeof e.code === "number" ? e.code : JSONRPC_ERRORS.InternalError, typeof e.message === "string" ? e.message : "error", e.data));
    } else p.resolve(msg.result);
  }

  /** Sends a request; resolves with the peer's result. */
  request(method: string, params?: Obj, signal?: AbortSignal): Promise<unknown> {
    if (this.closedWith !== null) return Promise.reject(this.closedWith);
    if (signal?.aborted === true) return Promise.reject(new JsonRpcError(JSONRPC_ERRORS.InternalError, "aborted"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        if (this.pending.delete(id)) reject(new JsonRpcError(JSONRPC_ERRORS.InternalError, "aborted"));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const done = (): void => signal?.removeEventListener("abort", onAbort);
      this.pending.set(id, {
        resolve: (v) => {
          done();
          resolve(v);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      this.write({ jsonrpc: "2.0", id, method, ...(params !== undefined ? { params } : {}) });
    });
  }

  notify(method: string, params?: Obj): void {
    this.write({ jsonrpc: "2.0", method, ...(params !== undefined ? { params } : {}) });
  }

  /** Rejects every pending request; later sends are dropped and requests rejected. Idempotent. */
  close(reason = "connection closed"): void {
    if (this.closedWith !== null) return;
    this.closedWith = new JsonRpcError(JSONRPC_ERRORS.InternalError, reason);
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(this.closedWith);
  }
}
