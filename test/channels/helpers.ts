/** Shared set-up for the channel tests: temp homes, a clock whose sleeps return at once (recorded), waits, a WeChat rig. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Clock, Timers } from "../../src/channels/common/backoff.js";
import type { AccountSettings } from "../../src/channels/common/component.js";
import { FeishuComponent } from "../../src/channels/feishu/component.js";
import { WechatComponent } from "../../src/channels/wechat/component.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";

export async function tempHome(): Promise<{ home: string; cleanup: () => Promise<void> }> {
  const home = await mkdtemp(join(tmpdir(), "berth-ch-"));
  return { home, cleanup: () => rm(home, { recursive: true, force: true }) };
}

/** Real time for `now`; every sleep is recorded (no test waits on a backoff or a deadline). */
export class InstantClock implements Clock {
  readonly sleeps: number[] = [];
  /** Added to the real time (tests move `now` forward without waiting). */
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
  private long: Array<() => void> = [];
  /** Backoff-sized sleeps (≤ 60 s) return at once; longer ones (question deadlines) wait for `fireLong()`. */
  sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
    this.sleeps.push(ms);
    if (ms <= 60_000) return new Promise((r) => setImmediate(() => r(!signal?.aborted)));
    return new Promise((r) => {
      const fire = (): void => r(!signal?.aborted);
      signal?.addEventListener(
        "abort",
        () => {
          this.long = this.long.filter((f) => f !== fire);
          r(false);
        },
        { once: true },
      );
      this.long.push(fire);
    });
  }
  get pendingLong(): number {
    return this.long.length;
  }
  fireLong(): void {
    for (const f of this.long.splice(0)) f();
  }
}

/** Polls a condition on the event loop (no wall-clock bound: the runner's timeout is the only limit). */
export async function until(pred: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await pred())) await new Promise((r) => setTimeout(r, 5));
}

/** Timers moved by hand: `advance(ms)` fires every timer due by then, in order (timers they set included). */
export class ManualTimers implements Timers {
  private nowMs = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  /** How many timers were ever set. */
  get setCount(): number {
    return this.seq;
  }
  set(fn: () => void, ms: number): number {
    const id = ++this.seq;
    this.pending.set(id, { at: this.nowMs + ms, fn });
    return id;
  }
  clear(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  get now(): number {
    return this.nowMs;
  }
  advance(ms: number): void {
    const target = this.nowMs + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | null = null;
      for (const e of this.pending) if (e[1].at <= target && (next === null || e[1].at < next[1].at)) next = e;
      if (next === null) break;
      this.pending.delete(next[0]);
      this.nowMs = next[1].at;
      next[1].fn();
    }
    this.nowMs = target;
  }
}

/** An InstantClock whose `now` is only what the test sets (`offsetMs` from a fixed start): no real time leaks in. */
export class FrozenClock extends InstantClock {
  static readonly START = 1_750_000_000_000;
  override now(): number {
    return FrozenClock.START + this.offsetMs;
  }
}

export interface WechatRigOptions {
  settings?: Partial<AccountSettings>;
  clock?: InstantClock;
  /** The long-poll's deadline timers (default: real ones). */
  timers?: ManualTimers;
  /** Reuse a home (a restart) or a fake (several components against one server). */
  home?: string;
  fake?: FakeIlink;
  driver?: FakeSessionDriver;
  log?: (line: string) => void;
}

/**
 * A WeChat component (anyone may talk to it, no remote tools, unless `settings` says otherwise) on a fresh home
 * against a started fake iLink server, with a fake session driver; each resource's cleanup is pushed onto `cleanups`
 * (run in reverse by the test file).
 */
export async function startWechat(
  cleanups: Array<() => Promise<void>>,
  o: WechatRigOptions = {},
): Promise<{ fake: FakeIlink; driver: FakeSessionDriver; comp: WechatComponent; clock: InstantClock; home: string }> {
  let home = o.home;
  if (home === undefined) {
    const t = await tempHome();
    cleanups.push(t.cleanup);
    home = t.home;
  }
  let fake = o.fake;
  if (fake === undefined) {
    const f = await new FakeIlink().start();
    cleanups.push(() => f.close());
    fake = f;
  }
  const driver = o.driver ?? new FakeSessionDriver();
  const clock = o.clock ?? new InstantClock();
  const comp = new WechatComponent({
    home,
    account: "default",
    credentials: { bot_token: fake.token, bot_id: fake.botId, user_id: fake.ownerId, base_url: fake.base, cdn_url: fake.cdnBase, saved_unix_seconds: 0 },
    settings: { enabled: true, workspace: home, remoteTools: "none", senders: "anyone", ...o.settings },
    driver,
    clock,
    timers: o.timers,
    log: o.log,
  });
  await comp.start();
  cleanups.push(() => comp.stop());
  return { fake, driver, comp, clock, home };
}

/**
 * A started Feishu account (anyone may write, no remote tools) against a started fake Feishu server, with a fake
 * session driver, once connected; each resource's cleanup is pushed onto `cleanups` (run in reverse by the test file).
 */
export async function startFeishu(
  cleanups: Array<() => Promise<void>>,
  o: { timers?: Timers; log?: (line: string) => void } = {},
): Promise<{ fake: FakeFeishu; driver: FakeSessionDriver; comp: FeishuComponent; home: string }> {
  const fake = await new FakeFeishu().start();
  cleanups.push(() => fake.close());
  const { home, cleanup } = await tempHome();
  cleanups.push(cleanup);
  const driver = new FakeSessionDriver();
  const comp = new FeishuComponent({
    home,
    account: "default",
    credentials: { brand: "feishu", app_id: fake.appId, app_secret: fake.appSecret, owner_open_id: "ou_owner000000001", open_url: fake.base, saved_unix_seconds: 0 },
    settings: { enabled: true, workspace: home, remoteTools: "none", senders: "anyone" },
    driver,
    clock: new InstantClock(),
    ...(o.timers !== undefined ? { timers: o.timers } : {}),
    log: o.log,
  });
  await comp.start();
  cleanups.push(() => comp.stop());
  await comp.health.until((h) => h.state === "connected");
  return { fake, driver, comp, home };
}

/**
 * Runs every clean-up in order, even after one fails, then throws the first failure: a home that cannot be removed
 * must not leave a fake server open, which kept the test process alive until its 300 s timeout.
 */
export async function runCleanups(cleanups: Array<() => Promise<void>>): Promise<void> {
  const failed: unknown[] = [];
  for (const c of cleanups) {
    try {
      await c();
    } catch (err) {
      failed.push(err);
    }
  }
  if (failed.length > 0) throw failed[0] instanceof Error ? failed[0] : new Error(String(failed[0]));
}
