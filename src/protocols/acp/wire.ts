/**
 * `berth acp`'s wire: the SDK's NDJSON stream, guarded on both sides, behind initialize-first.ts.
 *
 * Contracts:
 * - A line longer than `MAX_MESSAGE_BYTES` is not parsed: its bytes are dropped as they arrive (memory stays bounded
 *   by the limit), and once its end is read it is answered `-32600` with `id: null` and a fixed message naming the
 *   limit; reading goes on with the next line. (The SDK alone would end the connection on such a line, and with it
 *   every running turn.) The limit holds the largest prompt `prompt-content.ts` accepts.
 * - The SDK's answers to messages it cannot use at all (`id: null`) carry a fixed message saying what is wrong:
 *   `-32700` for a line that is not JSON, `-32600` for JSON that is no JSON-RPC 2.0 message (no `jsonrpc: "2.0"`,
 *   an id that is no string, number or null, …), without echoing the message back in `data`. Every other frame is
 *   written as the SDK made it, in the SDK's order.
 * - A request of Berth's that it withdraws (`$/cancel_request`: it no longer waits for the answer) is settled on
 *   Berth's side as the request is written: the SDK is handed a `-32800` answer for it, so it is not kept in the
 *   SDK's pending list until an editor that may never answer does (the SDK keeps abandoned requests for ever).
 * - Only answers to Berth's requests still waited for (written, neither answered nor withdrawn) reach the SDK: the
 *   editor's late answer to a withdrawn one, however long ago, or an answer naming an ID Berth never used, is dropped
 *   unread (the SDK would note each on stderr, noise in the editor's agent log). What is remembered is the requests
 *   still waited for, not the withdrawn ones, so memory does not grow with withdrawals.
 * - The SDK's bare "Invalid params" (`-32602`) names the field and the fix (invalid-params.ts).
 * - A request reusing the id of one still being answered is not run (request-ids.ts).
 * - The end of the input reaches the SDK only once every request read before it has been answered, within bounds
 *   (input-end.ts): the SDK would abort them all and write nothing more. At the end, `onInputEnd` runs first (the
 *   connection cancels its turns), then every request of Berth's still waited for is withdrawn (`$/cancel_request`,
 *   settled on Berth's side), and each request Berth writes afterwards is settled as it is written: no answer can come.
 */
import { ndJsonStream, type AnyMessage, type Stream } from "@agentclientprotocol/sdk";
import { initializeFirst } from "./initialize-first.js";
import { holdInputEnd, type EndOptions } from "./input-end.js";
import { explainingInvalidParams } from "./invalid-params.js";
import { refuseDuplicateIds } from "./request-ids.js";

export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

const NEWLINE = 0x0a;

export const WIRE_ERRORS = {
  tooLarge: `Invalid request: a message is longer than ${MAX_MESSAGE_BYTES} bytes; it was not read (send large files as resource links, not embedded)`,
  parse: "Parse error: a line is not valid JSON; send one JSON-RPC message per line",
  notJsonRpc:
    'Invalid request: not a JSON-RPC 2.0 message; each message is a JSON object with "jsonrpc": "2.0", and a request has a string "method" and an "id" that is a string or a number',
} as const;

/** Passes complete lines of at most `max` bytes (line ending excluded); drops longer ones, calling `onTooLarge` at their end. */
export function limitLines(input: ReadableStream<Uint8Array>, max: number, onTooLarge: () => void): ReadableStream<Uint8Array> {
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  let dropping = false;
  const release = (ctl: TransformStreamDefaultController<Uint8Array>): void => {
    for (const h of held) ctl.enqueue(h);
    held = [];
    heldBytes = 0;
  };
  return input.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        let start = 0;
        for (let nl = chunk.indexOf(NEWLINE); nl !== -1; nl = chunk.indexOf(NEWLINE, start)) {
          const line = chunk.subarray(start, nl + 1);
          start = nl + 1;
          if (dropping || heldBytes + line.length - 1 > max) {
            dropping = false;
            held = [];
            heldBytes = 0;
            onTooLarge();
            continue;
          }
          held.push(line);
          release(ctl);
        }
        if (start === chunk.length || dropping) return;
        const tail = chunk.subarray(start);
        if (heldBytes + tail.length > max) {
          dropping = true;
          held = [];
          heldBytes = 0;
          return;
        }
        held.push(tail);
        heldBytes += tail.length;
      },
      flush(ctl) {
        if (dropping) onTooLarge();
        else release(ctl);
      },
    }),
  );
}

const encoder = new TextEncoder();
const frame = (message: unknown): Uint8Array => encoder.encode(JSON.stringify(message) + "\n");
/** How every SDK protocol error (`protocolErrorResponse`) starts; other frames are never parsed here. */
const PROTOCOL_ERROR = encoder.encode('{"jsonrpc":"2.0","id":null,"error":{"code":-32');

function startsWith(chunk: Uint8Array, prefix: Uint8Array): boolean {
  if (chunk.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (chunk[i] !== prefix[i]) return false;
  return true;
}

/** The fixed form of an SDK protocol error, or the chunk as it is. */
function fixProtocolError(chunk: Uint8Array): Uint8Array {
  if (!startsWith(chunk, PROTOCOL_ERROR)) return chunk;
  let m: { error?: { code?: unknown; message?: unknown } };
  try {
    m = JSON.parse(new TextDecoder().decode(chunk)) as typeof m;
  } catch {
    return chunk;
  }
  const code = m.error?.code;
  const message = m.error?.message;
  if (code === -32700 && message === "Parse error") return frame({ jsonrpc: "2.0", id: null, error: { code, message: WIRE_ERRORS.parse } });
  if (code === -32600 && message === "Invalid request") return frame({ jsonrpc: "2.0", id: null, error: { code, message: WIRE_ERRORS.notJsonRpc } });
  return chunk;
}

type Id = string | number;
const isId = (v: unknown): v is Id => typeof v === "string" || typeof v === "number";

/**
 * Settles each request Berth withdraws as it is written, and passes on only answers to requests waited for.
 * `withdrawAll` (the input has ended: the editor can no longer answer) withdraws every request still waited for, and
 * settles each one written after it as it is written.
 */
export function settleWithdrawn(s: Stream): Stream & { withdrawAll(): void } {
  /** Berth's requests written and neither answered nor withdrawn. */
  const waiting = new Set<Id>();
  /** Requests `withdrawAll` withdrew (the SDK's own `$/cancel_request` for one is then not written twice). */
  let withdrawnAtEnd: Set<Id> | null = null;
  let toSdk: TransformStreamDefaultController<AnyMessage> | null = null;
  const settle = (id: Id): void => {
    if (toSdk === null) return;
    try {
      toSdk.enqueue({ jsonrpc: "2.0", id, error: { code: -32800, message: "Request cancelled" } });
    } catch {
      // The input has ended: the SDK settles every pending request as it closes.
    }
  };
  const readable = s.readable.pipeThrough(
    new TransformStream<AnyMessage, AnyMessage>({
      start: (ctl) => void (toSdk = ctl),
      transform(msg, ctl) {
        const id = "method" in msg ? undefined : (msg as { id?: unknown }).id;
        if (isId(id) && !waiting.delete(id)) return;
        ctl.enqueue(msg);
      },
      flush: () => void (toSdk = null),
    }),
  );
  const writer = s.writable.getWriter();
  const writable = new WritableStream<AnyMessage>({
    write(msg) {
      if ("method" in msg && "id" in msg && isId(msg.id)) {
        // After the input's end no answer can come: the request is still written (a terminal/kill still acts).
        if (withdrawnAtEnd !== null) settle(msg.id);
        else waiting.add(msg.id);
      }
      const requestId = "method" in msg && msg.method === "$/cancel_request" ? (msg.params as { requestId?: unknown } | undefined)?.requestId : undefined;
      if (isId(requestId)) {
        if (withdrawnAtEnd?.has(requestId) === true) return Promise.resolve();
        if (waiting.delete(requestId)) settle(requestId);
      }
      return writer.write(msg);
    },
    close: () => writer.close(),
    abort: (reason) => writer.abort(reason),
  });
  const withdrawAll = (): void => {
    if (withdrawnAtEnd !== null) return;
    withdrawnAtEnd = new Set(waiting);
    waiting.clear();
    for (const id of withdrawnAtEnd) {
      settle(id);
      writer.write({ jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: id } }).catch(() => undefined);
    }
  };
  return { readable, writable, withdrawAll };
}

/** What the wire does at the input's end. */
export interface WireOptions {
  /** Sees every message handed to the SDK, in read order, and every frame it writes (read-order.ts). */
  observe?: (s: Stream) => Stream;
  /** Runs as the input ends, before Berth's requests still waited for are withdrawn (the connection ends its turns). */
  onInputEnd?: () => void;
  /** The bounds of the wait for the answers to requests read before the end (input-end.ts); tests inject a clock. */
  end?: EndOptions;
}

/** The guarded stream the agent app connects to. */
export function acpWire(output: WritableStream<Uint8Array>, input: ReadableStream<Uint8Array>, o: WireOptions = {}): Stream {
  // One writer serializes the SDK's frames and the too-large answers (each write is one whole frame).
  const out = output.getWriter();
  const send = (bytes: Uint8Array): Promise<void> => out.write(bytes);
  const guardedOut = new WritableStream<Uint8Array>({
    write: (chunk) => send(fixProtocolError(chunk)),
    close: () => out.close(),
    abort: (reason) => out.abort(reason),
  });
  const tooLarge = (): void => void send(frame({ jsonrpc: "2.0", id: null, error: { code: -32600, message: WIRE_ERRORS.tooLarge } })).catch(() => undefined);
  // The SDK's own bound sits above ours, so it never ends the connection over a line we passed.
  const lines = ndJsonStream(guardedOut, limitLines(input, MAX_MESSAGE_BYTES, tooLarge), { maxMessageBytes: MAX_MESSAGE_BYTES + 1 });
  // The end is held behind the duplicate-id guard (each request it counts has its own id) and ahead of the
  // settling of Berth's requests, which can still hand the SDK their settlements while the end is held.
  const held = holdInputEnd(refuseDuplicateIds(initializeFirst(lines)), o.end);
  const settled = settleWithdrawn(held.stream);
  held.onEnd(() => {
    o.onInputEnd?.();
    settled.withdrawAll();
  });
  return explainingInvalidParams(o.observe === undefined ? settled : o.observe(settled));
}
