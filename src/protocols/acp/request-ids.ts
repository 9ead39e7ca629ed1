/**
 * The editor's request IDs in flight: a request that reuses the ID of one still being answered is not run.
 *
 * Contracts:
 * - A well-formed request (`jsonrpc: "2.0"`, a string `method`, an `id` that is a string, a finite number or null)
 *   whose ID equals that of an earlier request not yet answered is dropped before the SDK sees it, and answered
 *   `-32600` with `id: null` and a fixed message (the ID is not echoed). Not with its own ID: the editor would take
 *   that refusal, written at once, for the answer to the earlier request, and then meet the real answer as one to
 *   nothing. JSON-RPC requires IDs to tell requests in flight apart; ACP says nothing more.
 * - An ID is in flight from the moment its request is read until Berth hands the answer to the output; it may then be
 *   used again. Messages that are no well-formed request are left to the SDK (it refuses them with `id: null`).
 * - What is remembered is the IDs of requests being answered, never more than that.
 * - A notification method sent as a request (`session/cancel` or `$/cancel_request` with an `id`) is not run either:
 *   it is answered under its id with `-32601` and a message saying to send it without an `id` (the SDK's own answer
 *   named no fix, and a cancel the editor believes it sent would silently do nothing).
 * - The SDK's `-32601` for an unknown method quotes the method whole, twice (message and `data.method`): a method name
 *   of 60 MiB came back as an answer twice its size. It is answered with at most `MAX_QUOTED` characters of the name,
 *   in both places, and a message naming the fix.
 */
import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";

export const DUPLICATE_ID =
  "Invalid request: a request with this id is still being answered; it was not run. Give each request in flight its own id (JSON-RPC correlates answers by id)";

/** The agent-side methods ACP defines as notifications only. */
const NOTIFICATIONS = new Set(["session/cancel", "$/cancel_request"]);

export const notificationAsRequest = (method: string): string =>
  `Method not found: ${method} is a notification, not a request, and was not run; send it without an "id"`;

/** How much of an editor's method name an answer quotes. */
export const MAX_QUOTED = 64;

/** At most `MAX_QUOTED` UTF-16 units of `method`, never half of a surrogate pair. */
function quoted(method: string): string {
  if (method.length <= MAX_QUOTED) return method;
  const high = method.charCodeAt(MAX_QUOTED - 1);
  return `${method.slice(0, high >= 0xd800 && high <= 0xdbff ? MAX_QUOTED - 1 : MAX_QUOTED)}…`;
}

export const unknownMethod = (method: string): string =>
  `Method not found: ${quoted(method)} is not a method berth acp serves; see the initialize answer's agentCapabilities for what it offers`;

/** The SDK's answer for an unknown method, with the name bounded and the fix named; any other message as it is. */
function boundUnknownMethod(msg: AnyMessage): AnyMessage {
  if ("method" in msg || !("error" in msg)) return msg;
  const { code, message, data } = msg.error as { code: number; message: string; data?: { method?: unknown } };
  const method = data?.method;
  if (code !== -32601 || typeof method !== "string" || message !== `"Method not found": ${method}`) return msg;
  return { ...msg, error: { code, message: unknownMethod(method), data: { method: quoted(method) } } };
}

type Id = string | number | null;
const isId = (v: unknown): v is Id => v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
const isRequest = (m: AnyMessage): m is AnyMessage & { id: Id; method: string } =>
  (m as { jsonrpc?: unknown }).jsonrpc === "2.0" && "method" in m && typeof m.method === "string" && "id" in m && isId(m.id);

export function refuseDuplicateIds(s: Stream): Stream {
  const inFlight = new Set<Id>();
  const writer = s.writable.getWriter();
  const readable = s.readable.pipeThrough(
    new TransformStream<AnyMessage, AnyMessage>({
      transform(msg, ctl) {
        if (isRequest(msg)) {
          if (inFlight.has(msg.id)) {
            writer.write({ jsonrpc: "2.0", id: null, error: { code: -32600, message: DUPLICATE_ID } }).catch(() => undefined);
            return;
          }
          if (NOTIFICATIONS.has(msg.method)) {
            writer.write({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: notificationAsRequest(msg.method) } }).catch(() => undefined);
            return;
          }
          inFlight.add(msg.id);
        }
        ctl.enqueue(msg);
      },
    }),
  );
  const writable = new WritableStream<AnyMessage>({
    write(msg) {
      if (!("method" in msg) && "id" in msg && isId(msg.id)) inFlight.delete(msg.id);
      return writer.write(boundUnknownMethod(msg));
    },
    close: () => writer.close(),
    abort: (reason) => writer.abort(reason),
  });
  return { readable, writable };
}
