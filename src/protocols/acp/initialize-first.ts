/**
 * `initialize` answered before anything sent after it is read. The SDK's agent refuses every request that arrives
 * before `initialize`'s answer is out (`-32600`, "ACP connection must be initialized before '…'"), so a client that
 * pipelines its first requests behind `initialize` (JSON-RPC allows it: `initialize` then `session/new` in one
 * write) had them refused although it did nothing wrong. Contracts:
 * - After an `initialize` request is read, nothing more is read until a response to its `id` (result or error) has
 *   been handed to the output (only a well-formed request, `jsonrpc: "2.0"` and a string, number or null id, holds:
 *   the SDK refuses any other with `id: null`, an answer that would never release the hold); then reading goes on in order. Each `initialize` (a client may send it again) holds
 *   what follows it the same way. A request before any `initialize` is untouched (the SDK still refuses it).
 * - Messages are never reordered, dropped or changed; only the reading of later ones waits. A failed write of the
 *   answer releases the hold too (the connection is then ending).
 */
import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";

type Id = string | number | null;

/** JSON-RPC's request ids; the SDK answers a request with any other id (or no `jsonrpc: "2.0"`) with `id: null`. */
const isId = (v: unknown): v is Id => v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
/** An `initialize` request the SDK will answer under its own id (a malformed one is refused with `id: null`). */
const isInitialize = (m: AnyMessage): m is AnyMessage & { id: Id } =>
  (m as { jsonrpc?: unknown }).jsonrpc === "2.0" && "method" in m && m.method === "initialize" && "id" in m && isId(m.id);
const answers = (m: AnyMessage, id: Id): boolean => !("method" in m) && "id" in m && m.id === id;

export function initializeFirst(s: Stream): Stream {
  /** The `initialize` whose answer the input waits for, and how to let it go on. */
  let held: { id: Id; release: () => void } | null = null;
  let gate: Promise<void> | null = null;
  const readable = s.readable.pipeThrough(
    new TransformStream<AnyMessage, AnyMessage>({
      async transform(msg, ctl) {
        if (gate !== null) await gate;
        ctl.enqueue(msg);
        if (isInitialize(msg)) {
          const id = msg.id;
          gate = new Promise<void>((resolve) => {
            held = {
              id,
              release: () => {
                held = null;
                gate = null;
                resolve();
              },
            };
          });
        }
      },
    }),
  );
  const writer = s.writable.getWriter();
  const writable = new WritableStream<AnyMessage>({
    async write(msg) {
      try {
        await writer.write(msg);
      } finally {
        if (held !== null && answers(msg, held.id)) held.release();
      }
    },
    close: () => writer.close(),
    abort: (reason) => writer.abort(reason),
  });
  return { readable, writable };
}
