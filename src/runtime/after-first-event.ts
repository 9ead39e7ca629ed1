/**
 * Deferred MCP start: servers whose tool lists were cached are not started with their session (tool-registries.ts);
 * the agent wraps a turn's provider so they start shortly after its first event, off the first token's path.
 */
import type { Provider, ProviderRequest } from "./types.js";

/** How long after a turn's first provider event deferred MCP servers start (see afterFirstEvent). */
const MCP_START_AFTER_FIRST_EVENT_MS = 30;

/** `p` calling `start` a moment after the first event of a stream has been handled by its consumer (or the stream ended). */
export function afterFirstEvent(p: Provider, start: () => void): Provider {
  // Spawning a server blocks the event loop for a few milliseconds (fork and exec): started in the step that handed
  // out the first event, it would hold that event's delivery (the door's write, an in-process client's print). So the
  // start waits a moment after the first event; a call to one of the servers' tools starts them at once anyway.
  const then = (): void => void setTimeout(start, MCP_START_AFTER_FIRST_EVENT_MS);
  async function* wrap<T>(it: AsyncIterable<T>, counts: (x: T) => boolean): AsyncGenerator<T, void, undefined> {
    let first = true;
    try {
      for await (const x of it) {
        yield x;
        if (first && counts(x)) {
          first = false;
          then();
        }
      }
    } finally {
      if (first) then();
    }
  }
  const batches = p.streamBatches?.bind(p);
  return {
    id: p.id,
    api: p.api,
    stream: (req) => wrap(p.stream(req), () => true),
    ...(batches !== undefined ? { streamBatches: (req: ProviderRequest) => wrap(batches(req), (b) => b.events.length > 0) } : {}),
  };
}
