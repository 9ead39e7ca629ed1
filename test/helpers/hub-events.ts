/**
 * Every event a session hub reports, kept in order, and a wait for the first one (from an index on) that matches.
 * For tests driving a `SessionHub` in-process (test/runtime/).
 */
import type { SessionEvent, SessionHub } from "../../src/runtime/session/index.js";

export interface HubEvents {
  readonly events: SessionEvent[];
  /** The first event at index `from` or later matching `pred`, now or when it comes. */
  readonly next: (pred: (e: SessionEvent) => boolean, from?: number) => Promise<SessionEvent>;
}

export function collectHubEvents(hub: SessionHub): HubEvents {
  const events: SessionEvent[] = [];
  const waiters: Array<{ pred: (e: SessionEvent) => boolean; from: number; resolve: (e: SessionEvent) => void }> = [];
  hub.subscribe((e) => {
    events.push(e);
    for (const w of [...waiters]) {
      if (events.length - 1 >= w.from && w.pred(e)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(e);
      }
    }
  });
  const next = (pred: (e: SessionEvent) => boolean, from = 0): Promise<SessionEvent> => {
    const have = events.slice(from).find(pred);
    if (have !== undefined) return Promise.resolve(have);
    return new Promise((resolve) => waiters.push({ pred, from, resolve }));
  };
  return { events, next };
}
