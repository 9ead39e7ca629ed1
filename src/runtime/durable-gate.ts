/**
 * The durability gate of a turn: nothing the turn produces reaches a client before its user record is durable.
 */
import { mark } from "./debug-timing.js";
import type { RuntimeEvent, TurnSink } from "./events.js";

/**
 * Holds a turn's sink output until `durable` resolves (nothing reaches a client before the user record is durable),
 * then passes straight through; after a failed `durable` everything is dropped (the turn fails `persistence`).
 * It opens one microtask after `durable` resolved, so the provider request's last byte, which waits for the same
 * promise (`ProviderRequest.gate`, registered later), goes out before the held events (the request's `context`
 * event, lifecycle events) are delivered to the session's listeners: that delivery is not on the request's path.
 */
export function gatedSink(sink: TurnSink, durable: Promise<void>): TurnSink {
  let state: "pending" | "open" | "failed" = "pending";
  const held: RuntimeEvent[] = [];
  let first = true;
  // Everything below waits on `opened`, never on `durable` itself, so held events always go first.
  const opened = durable.then(() => undefined);
  void opened.then(
    () => {
      state = "open";
      for (const e of held.splice(0)) sink.event(e);
    },
    () => {
      state = "failed";
      held.length = 0;
    },
  );
  return {
    delta(text) {
      if (first) {
        first = false;
        mark("turn.first_delta");
      }
      if (state === "open") return sink.delta(text);
      if (state === "failed") return false;
      return opened.then(
        () => sink.delta(text),
        () => false,
      );
    },
    event(e) {
      if (state === "open") sink.event(e);
      else if (state === "pending") held.push(e);
    },
  };
}
