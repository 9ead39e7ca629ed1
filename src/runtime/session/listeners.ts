/**
 * Event delivery to a set of `SessionListener`s, shared by a session's runtime and the hub that fans every
 * runtime's events out to its own listeners, so both keep one contract: every listener is called in order (a
 * throwing one is skipped); any `false` refuses the delta; every returned promise is awaited (backpressure), and a
 * rejected one refuses it.
 */
import type { SessionEvent, SessionListener } from "./types.js";

/** Delivers an event (the result matters for deltas): false when a listener refused it, a promise on backpressure. */
export function deliver(listeners: Iterable<SessionListener>, e: SessionEvent): boolean | Promise<boolean> {
  let ok = true;
  let waits: Array<Promise<void | boolean>> | null = null;
  for (const l of listeners) {
    let r: ReturnType<SessionListener>;
    try {
      r = l(e);
    } catch {
      continue;
    }
    if (r === false) ok = false;
    else if (r !== undefined && r !== true) (waits ??= []).push(r);
  }
  if (waits === null) return ok;
  return Promise.all(waits).then(
    (rs) => ok && !rs.includes(false),
    () => false,
  );
}
