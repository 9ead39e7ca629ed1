/**
 * One call at a time per key: callers asking for a key whose call is still running share its promise (and so see
 * results in the order the calls started); once it settles, the next caller starts a fresh call. Nothing is cached
 * past settlement, so the map holds only calls in flight. Pure (no I/O of its own).
 */
export class SingleFlight<K, V> {
  private readonly running = new Map<K, Promise<V>>();

  run(key: K, call: () => Promise<V>): Promise<V> {
    let p = this.running.get(key);
    if (p === undefined) {
      p = call().finally(() => this.running.delete(key));
      this.running.set(key, p);
    }
    return p;
  }
}
