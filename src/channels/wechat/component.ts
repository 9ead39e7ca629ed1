/**
 * One WeChat account as a daemon component: the `getupdates` loop feeding a `ChatBridge`.
 *
 * Contract: `connected` only after an authenticated, validated `getupdates`; the cursor is saved only after the
 * batch's claims are durable; failures back off 1 → 60 s on the injected clock; a token error (`-14`, 401) stops the
 * loop in state `failed` with the fixed "log in again" error. Polls start at least MIN_POLL_INTERVAL_MS apart.
 */
import { Backoff, realClock, type Clock, type Timers } from "../common/backoff.js";
import { ChatBridge } from "../common/bridge.js";
import type { AccountSettings } from "../common/component.js";
import { Health } from "../common/component.js";
import type { ChatSessionDriver } from "../common/driver.js";
import { channelPaths } from "../common/files.js";
import { pruneMedia, pruneOutbox } from "../common/media.js";
import type { InboundMessage } from "../common/port.js";
import { MAX_CURSOR_BYTES } from "../common/ids.js";
import { DeliveryState } from "../common/state.js";
import { needsLogin, sanitizeError, type ComponentStatus } from "../common/status.js";
import { wechatFingerprint, type WechatCredentials } from "./credentials.js";
import { IlinkClient, IlinkError } from "./ilink.js";
import { normalizeWechat } from "./inbound.js";
import { WechatPort } from "./port.js";

/**
 * Successful polls start at least this far apart. A server that answers "nothing new" at once (instead of holding
 * the long-poll) would otherwise be polled in a tight loop, burning CPU and hammering it; a poll the server held
 * this long or longer is followed by the next at once, and a burst of messages waits at most this long.
 */
export const MIN_POLL_INTERVAL_MS = 1000;

export interface WechatComponentOptions {
  home: string;
  account: string;
  credentials: WechatCredentials;
  settings: AccountSettings;
  driver: ChatSessionDriver;
  clock?: Clock | undefined;
  /** The long-poll's deadline timers (tests fire them by hand). */
  timers?: Timers | undefined;
  log?: ((line: string) => void) | undefined;
}

export class WechatComponent {
  readonly health = new Health();
  private readonly clock: Clock;
  private readonly stopper = new AbortController();
  private loop: Promise<void> | null = null;
  bridge: ChatBridge | null = null;

  constructor(private readonly o: WechatComponentOptions) {
    this.clock = o.clock ?? realClock;
  }

  status(): ComponentStatus {
    const c = this.o.credentials;
    return this.health.view("wechat", this.o.account, c.bot_id || null, c.user_id || null, this.o.settings);
  }

  async start(): Promise<void> {
    const c = this.o.credentials;
    const paths = channelPaths(this.o.home, "wechat", this.o.account);
    const client = new IlinkClient({ base: c.base_url, cdn: c.cdn_url, token: c.bot_token, clock: this.clock, timers: this.o.timers });
    const state = await DeliveryState.load(paths.state, wechatFingerprint(c), this.o.log);
    await pruneMedia(paths.media, this.clock.now()).catch(() => 0);
    await pruneOutbox(paths.outbox, this.clock.now()).catch(() => 0);
    const bridge = new ChatBridge({
      port: new WechatPort(client),
      driver: this.o.driver,
      state,
      policy: {
        channelName: "WeChat",
        ownerId: c.user_id || null,
        senders: this.o.settings.senders,
        remoteTools: this.o.settings.remoteTools,
        workspace: this.o.settings.workspace,
      },
      mediaRoot: paths.media,
      clock: this.clock,
      log: this.o.log,
    });
    this.bridge = bridge;
    this.loop = this.run(client, state, bridge);
  }

  private async run(client: IlinkClient, state: DeliveryState, bridge: ChatBridge): Promise<void> {
    const signal = this.stopper.signal;
    const backoff = new Backoff();
    let pollMs = 35_000;
    let recovered = false;
    // The cursor polled with: the saved one, or a newer one too long to save (MAX_CURSOR_BYTES), kept in memory only.
    let cursor = state.cursor;
    let cursorLogged = false;
    while (!signal.aborted) {
      try {
        if (!recovered) {
          await bridge.recover();
          recovered = true;
        }
        const started = this.clock.now();
        const up = await client.getUpdates(cursor, pollMs + 5_000, signal);
        const took = this.clock.now() - started;
        if (up.contacted) {
          pollMs = up.pollMs;
          this.health.success(this.clock.now());
          backoff.reset();
        }
        const batch: InboundMessage[] = [];
        let ignored = 0;
        for (const raw of up.msgs) {
          const { id, msg } = normalizeWechat(raw);
          if (msg) batch.push(msg);
          else if (id !== null) {
            state.markIgnored(id);
            ignored++;
          }
        }
        await bridge.accept(batch);
        const saved = state.cursor;
        // the cursor moves only now, after the batch's claims are durable
        if (!state.setCursor(up.cursor) && !cursorLogged) {
          cursorLogged = true;
          this.o.log?.(`wechat: the server's poll cursor is over ${MAX_CURSOR_BYTES} bytes; it is used but not saved (a restart resumes from the last saved one)`);
        }
        cursor = up.cursor;
        if (state.cursor !== saved || ignored > 0) await state.save();
        if (up.contacted && took < MIN_POLL_INTERVAL_MS) await this.clock.sleep(MIN_POLL_INTERVAL_MS - took, signal);
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof IlinkError && err.kind === "token") {
          this.health.set("failed", needsLogin("wechat", this.o.account));
          return;
        }
        const msg = err instanceof IlinkError ? err.message : `internal error: ${(err as Error).name}`;
        this.health.set("backoff", sanitizeError(msg));
        this.health.restarts++;
        await this.clock.sleep(backoff.next(), signal);
        if (!signal.aborted) this.health.set("starting");
      }
    }
  }

  /** Stops polling and the bridge; running turns are cancelled and their claims kept for recovery. */
  async stop(): Promise<void> {
    this.health.set("stopping");
    this.stopper.abort();
    await this.loop;
    await this.bridge?.stop();
    this.health.set("stopped");
  }
}
