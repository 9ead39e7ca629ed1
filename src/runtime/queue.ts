/**
 * A per-session prompt queue: prompts run one at a time, in submission order. Contracts:
 * - `submit` returns at once; `done` settles with the prompt's outcome (never rejects: a throwing runner yields
 *   `failed`).
 * - `cancel()` on a queued prompt removes it without running (`done` → `cancelled`, empty text); on the running
 *   prompt it aborts its signal. Idempotent.
 * - `clear()` cancels every queued prompt and the running one (session close / shutdown).
 */
import type { TurnOutcome } from "./events.js";

export interface QueuedPrompt<P> {
  readonly id: string;
  readonly payload: P;
  readonly done: Promise<TurnOutcome>;
  cancel(): void;
  readonly state: "queued" | "running" | "done";
}

interface Entry<P> {
  id: string;
  payload: P;
  ctl: AbortController;
  state: "queued" | "running" | "done";
  resolve: (o: TurnOutcome) => void;
}

const EMPTY_USAGE = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 };

export class PromptQueue<P> {
  private readonly waiting: Entry<P>[] = [];
  private running: Entry<P> | null = null;

  constructor(private readonly run: (id: string, payload: P, signal: AbortSignal) => Promise<TurnOutcome>) {}

  get length(): number {
    return this.waiting.length + (this.running !== null ? 1 : 0);
  }

  submit(id: string, payload: P): QueuedPrompt<P> {
    let resolve!: (o: TurnOutcome) => void;
    const done = new Promise<TurnOutcome>((r) => (resolve = r));
    const e: Entry<P> = { id, payload, ctl: new AbortController(), state: "queued", resolve };
    this.waiting.push(e);
    this.pump();
    return {
      id,
      payload,
      done,
      cancel: () => this.cancel(e),
      get state() {
        return e.state;
      },
    };
  }

  private cancel(e: Entry<P>): void {
    if (e.state === "queued") {
      const i = this.waiting.indexOf(e);
      if (i >= 0) this.waiting.splice(i, 1);
      e.state = "done";
      e.resolve({ status: "cancelled", assistantText: "", usage: { ...EMPTY_USAGE } });
    } else if (e.state === "running") e.ctl.abort();
  }

  clear(): void {
    for (const e of [...this.waiting]) this.cancel(e);
    if (this.running) this.cancel(this.running);
  }

  private pump(): void {
    if (this.running !== null) return;
    const e = this.waiting.shift();
    if (e === undefined) return;
    this.running = e;
    e.state = "running";
    void this.run(e.id, e.payload, e.ctl.signal)
      .catch((): TurnOutcome => ({ status: "failed", assistantText: "", reason: "internal", usage: { ...EMPTY_USAGE } }))
      .then((o) => {
        e.state = "done";
        this.running = null;
        e.resolve(o);
        this.pump();
      });
  }
}
