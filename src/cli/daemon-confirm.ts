/**
 * The daemon's `confirm_ask` question registry (in memory only: a restart forgets every question).
 *
 * Contract:
 * - `ask` returns at once with a `pending` entry and sends the question in the background through the chat bridge;
 *   the entry settles to the bridge's answer (`yes`, `no`, `expired`, `withdrawn`, `failed`).
 * - A pending question nobody followed (`ask` or `follow`) for `FOLLOW_MS` is withdrawn: the owner is told and the
 *   chat is free for the next question. `sweep()` applies this; the daemon calls it on a timer and on every follow.
 * - Settled entries are forgotten `KEEP_MS` after they settle (then `confirm_status` answers `confirm_error`).
 */
import { randomBytes } from "node:crypto";
import type { ChatBridge } from "../channels/common/bridge.js";
import type { ConfirmState } from "../channels/common/confirm.js";

export const FOLLOW_MS = 60_000;
export const KEEP_MS = 3_600_000;

export interface ConfirmView {
  id: string;
  state: ConfirmState;
  chat: string | null;
  deadline_unix_seconds: number;
}

interface Entry {
  view: ConfirmView;
  bridge: ChatBridge;
  followedMs: number;
  settledMs: number | null;
}

export class ConfirmRegistry {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly now: () => number = Date.now) {}

  /** True when a question of this registry still waits in `chat`. */
  waiting(chat: string): boolean {
    for (const e of this.entries.values()) if (e.view.chat === chat && e.view.state === "pending") return true;
    return false;
  }

  ask(question: string, timeoutSeconds: number, target: { chat: string; bridge: ChatBridge }): ConfirmView {
    this.sweep();
    const now = this.now();
    const id = randomBytes(6).toString("hex");
    const e: Entry = {
      view: { id, state: "pending", chat: target.chat, deadline_unix_seconds: Math.floor(now / 1000) + timeoutSeconds },
      bridge: target.bridge,
      followedMs: now,
      settledMs: null,
    };
    this.entries.set(id, e);
    void target.bridge
      .ask(question, timeoutSeconds)
      .catch(() => ({ state: "failed" as ConfirmState }))
      .then((r) => {
        if (e.view.state !== "pending") return;
        e.view.state = r.state;
        e.settledMs = this.now();
      });
    return { ...e.view };
  }

  /** `confirm_status`: the question's view (and it counts as followed), or null for an unknown ID. */
  follow(id: string): ConfirmView | null {
    this.sweep();
    const e = this.entries.get(id);
    if (e === undefined) return null;
    e.followedMs = this.now();
    return { ...e.view };
  }

  sweep(): void {
    const now = this.now();
    for (const [id, e] of this.entries) {
      if (e.view.state === "pending" && now - e.followedMs >= FOLLOW_MS) {
        e.view.state = "withdrawn";
        e.settledMs = now;
        e.bridge.withdrawQuestion();
      } else if (e.settledMs !== null && now - e.settledMs >= KEEP_MS) this.entries.delete(id);
    }
  }
}
