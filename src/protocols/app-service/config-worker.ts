/**
 * The one configuration worker shared by the five catalog/config routes (app-service v1 §Catalogs and
 * configuration). Contracts:
 * - `run(job)` starts `job` only when no other job is running; otherwise it answers `configuration_busy`
 *   without starting anything. The check and the claim happen synchronously, before the next record is read.
 * - A job that throws answers the fixed `internal_error`.
 * - `idle()` (EOF drain) waits for the running job to finish; it never cancels a write or a refresh.
 */
import type { Outcome } from "./descriptor.js";

export class ConfigWorker {
  private current: Promise<Outcome> | null = null;

  run(job: () => Promise<Outcome>): Promise<Outcome> {
    if (this.current !== null) return Promise.resolve({ error: "configuration_busy" });
    const p: Promise<Outcome> = job()
      .catch((): Outcome => ({ error: "internal_error" }))
      .finally(() => {
        if (this.current === p) this.current = null;
      });
    this.current = p;
    return p;
  }

  get busy(): boolean {
    return this.current !== null;
  }

  async idle(): Promise<void> {
    while (this.current !== null) await this.current;
  }
}
