/**
 * Requests to the editor whose answers no turn waits for (`terminal/kill`, `terminal/release`, a `terminal/create`
 * whose command was cancelled meanwhile).
 *
 * Contracts:
 * - At most `MAX_UNAWAITED` of them are outstanding per connection. Tracking one more withdraws the oldest
 *   (`$/cancel_request`, settled on Berth's side at once by wire.ts), so an editor that never answers them cannot
 *   make memory grow with every cancelled turn. An editor that answers keeps all of them: each leaves the set when
 *   answered.
 * - Each request must be sent with the tracked controller's signal and `stopWaitingOnCancel`.
 */
export const MAX_UNAWAITED = 16;

export class Unawaited {
  private readonly live = new Set<AbortController>();

  constructor(private readonly max = MAX_UNAWAITED) {}

  /** Tracks `answer` (the request sent with `ctl.signal`) until it settles or is withdrawn. */
  track(ctl: AbortController, answer: Promise<unknown>): void {
    this.live.add(ctl);
    const forget = (): void => void this.live.delete(ctl);
    answer.then(forget, forget);
    if (this.live.size <= this.max) return;
    const oldest = this.live.values().next().value as AbortController;
    this.live.delete(oldest);
    oldest.abort();
  }

}
