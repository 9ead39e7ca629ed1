/**
 * Deferred MCP start: servers whose tool lists were cached are not started with their session (tool-registries.ts);
 * the agent wraps a turn's provider so they start shortly after its first event, off the first token's path.
 */
import type { Provider, ProviderRequest } from "./types.js";

/** How long after a turn's first provider event deferred MCP servers start (see afterFirstEvent). */
const MCP_START_AFTER_FIRST_EVENT_MS = 30;

/**
 * `it`, calling `then` once: when the consumer asks for the item after the first counted one (it has handled that
 * one), or when the stream ends, fails or is closed (`return`) before. Items pass through unchanged; once `then` ran,
 * `next` is the source's own call (no layer, no extra promise per item for the rest of the stream).
 */
export function onceHandled<T>(it: AsyncIterable<T>, counts: (x: T) => boolean, then: () => void): AsyncIterableIterator<T> {
  const src = it[Symbol.asyncIterator]();
  // 0: no counted item handed out yet; 1: one was; 2: `then` ran.
  let state = 0;
  const fire = (): void => {
    if (state === 2) return;
    state = 2;
    then();
  };
  const wrapped: AsyncIterableIterator<T> = {
    next: () => {
      if (state === 1) fire();
      if (state === 2) return src.next();
      return src.next().then(
        (r) => {
          if (r.done === true) fire();
          else if (counts(r.value)) state = 1;
          return r;
        },
        (e: unknown) => {
          fire();
          throw e;
        },
      );
    },
    return: (value?: unknown) => {
      fire();
      return src.return !== undefined ? src.return(value) : Promise.resolve({ done: true as const, value: undefined });
    },
    [Symbol.asyncIterator]: () => wrapped,
  };
  return wrapped;
}

/** `p` calling `start` a moment after the first event of a stream has been handled by its consumer (or the stream ended). */
export function afterFirstEvent(p: Provider, start: () => void): Provider {
  // Spawning a server blocks the event loop for a few milliseconds (fork and exec): started in the step that handed
  // out the first event, it would hold that event's delivery (the door's write, an in-process client's print). So the
  // start waits a moment after the first event; a call to one of the servers' tools starts them at once anyway.
  const then = (): void => void setTimeout(start, MCP_START_AFTER_FIRST_EVENT_MS);
  const batches = p.streamBatches?.bind(p);
  return {
    id: p.id,
    api: p.api,
    stream: (req) => onceHandled(p.stream(req), () => true, then),
    ...(batches !== undefined ? { streamBatches: (req: ProviderRequest) => onceHandled(batches(req), (b) => b.events.length > 0, then) } : {}),
  };
}
