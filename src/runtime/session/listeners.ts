/**
 * Event delivery to a set of `SessionListener`s, shared by a session's runtime and the hub that fans every
 * runtime's events out to its own listeners, so both keep one contract: every listener is called in order (a
 * throwing one is skipped); any `false` refuses the delta; every returned promise is awaited (backpressure), and a
 * rejected one refuses it.
 */
import type { SessionEvent, SessionListener } from "./types.js";

/**
 * A set of listeners, delivering an event (the result matters for deltas) without an iterator: a lone listener (one
 * door, or the hub's fan-out) is called directly, several from an array kept beside the set. A listener removed
 * during a delivery is not called by it; one added during a delivery is called from the next.
 */
export class ListenerSet implements Iterable<SessionListener> {
  private readonly set = new Set<SessionListener>();
  private one: SessionListener | null = null;
  private list: SessionListener[] = [];

  add(listener: SessionListener): () => void {
    this.set.add(listener);
    this.sync();
    return () => {
      this.set.delete(listener);
      this.sync();
    };
  }

  [Symbol.iterator](): Iterator<SessionListener> {
    return this.set.values();
  }

  /** Delivers `e`: false when a listener refused it, a promise on backpressure. */
  deliver(e: SessionEvent): boolean | Promise<boolean> {
    const one = this.one;
    if (one === null) return this.list.length === 0 ? true : this.deliverAll(e);
    let r: ReturnType<SessionListener>;
    try {
      r = one(e);
    } catch {
      return true;
    }
    if (r === undefined || r === true) return true;
    if (r === false) return false;
    return r.then(notFalse, refused);
  }

  private deliverAll(e: SessionEvent): boolean | Promise<boolean> {
    const list = this.list;
    let ok = true;
    let waits: Array<Promise<void | boolean>> | null = null;
    for (let i = 0; i < list.length; i++) {
      const l = list[i] as SessionListener;
      if (i > 0 && !this.set.has(l)) continue;
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
      refused,
    );
  }

  private sync(): void {
    this.list = [...this.set];
    this.one = this.list.length === 1 ? (this.list[0] as SessionListener) : null;
  }
}

const notFalse = (v: void | boolean): boolean => v !== false;
const refused = (): boolean => false;
