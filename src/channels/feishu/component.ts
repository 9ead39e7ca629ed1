/**
 * One Feishu/Lark account as a daemon component: long connection → `ChatBridge`, with catch-up.
 *
 * Contract:
 * - Every (re)connect re-discovers the endpoint. Events arriving before catch-up ends wait (unacked) until it ends.
 * - Catch-up: for each of the 32 most recently active known chats, history since the checkpoint (≤24 h back,
 *   ≤4 pages of 50, oldest first) is handed to the bridge, whose dedup drops overlap with socket redeliveries.
 * - `connected` only once the socket is open AND catch-up finished; a drop is `disconnected`, then backoff
 *   1 → 60 s; the backoff starts again at 1 s only after a link that carried an event or stayed up STABLE_LINK_MS,
 *   so a server that drops every link as soon as it opens is not reconnected (and caught up) once a second forever. Bad app
 *   credentials stop in `failed` with the "log in again" error.
 * - An event is acked only after its claim is durable (the bridge's `accept` resolved), never after the turn.
 */
import { Backoff, realClock, type Clock, type Timers } from "../common/backoff.js";
import { ChatBridge } from "../common/bridge.js";
import { Health, type AccountSettings } from "../common/component.js";
import type { ChatSessionDriver } from "../common/driver.js";
import { channelPaths } from "../common/files.js";
import { pruneMedia, pruneOutbox } from "../common/media.js";
import type { InboundMessage } from "../common/port.js";
import { oversizedField } from "../common/ids.js";
import { DeliveryState } from "../common/state.js";
import { needsLogin, sanitizeError, type ComponentStatus } from "../common/status.js";
import { FeishuApi, FeishuError } from "./api.js";
import { feishuFingerprint, type FeishuCredentials } from "./credentials.js";
import { fromEvent, fromHistory } from "./inbound.js";
import { FeishuPort } from "./port.js";
import { DEAD_LINK, FeishuSocket, OVERSIZED_FRAME } from "./socket.js";

const CATCHUP_CHATS = 32;
const CATCHUP_PAGES = 4;
const CATCHUP_WINDOW_MS = 24 * 3600 * 1000;
const MAX_CHECKPOINT_CHATS = 64;
/** A link that stayed up this long was healthy: the next drop's backoff starts again at 1 s. */
export const STABLE_LINK_MS = 60_000;

export interface FeishuComponentOptions {
  home: string;
  account: string;
  credentials: FeishuCredentials;
  settings: AccountSettings;
  driver: ChatSessionDriver;
  clock?: Clock | undefined;
  /** The long connection's ping and dead-link timers and every REST request's deadline (tests drive them by hand). */
  timers?: Timers | undefined;
  log?: ((line: string) => void) | undefined;
}

export class FeishuComponent {
  readonly health = new Health();
  private readonly clock: Clock;
  private readonly stopper = new AbortController();
  private loop: Promise<void> | null = null;
  private socket: FeishuSocket | null = null;
  private botOpenId: string | null = null;
  /** Connections opened so far (tests observe reconnects). */
  connections = 0;
  bridge: ChatBridge | null = null;
  private state: DeliveryState | null = null;

  constructor(private readonly o: FeishuComponentOptions) {
    this.clock = o.clock ?? realClock;
  }

  status(): ComponentStatus {
    const c = this.o.credentials;
    return this.health.view("feishu", this.o.account, c.app_id, c.owner_open_id || null, this.o.settings);
  }

  async start(): Promise<void> {
    const c = this.o.credentials;
    const paths = channelPaths(this.o.home, "feishu", this.o.account);
    const api = new FeishuApi({ open: c.open_url, appId: c.app_id, appSecret: c.app_secret, clock: this.clock, timers: this.o.timers });
    this.state = await DeliveryState.load(paths.state, feishuFingerprint(c), this.o.log);
    await pruneMedia(paths.media, this.clock.now()).catch(() => 0);
    await pruneOutbox(paths.outbox, this.clock.now()).catch(() => 0);
    this.bridge = new ChatBridge({
      port: new FeishuPort(api),
      driver: this.o.driver,
      state: this.state,
      policy: {
        channelName: c.brand === "lark" ? "Lark" : "Feishu",
        ownerId: c.owner_open_id || null,
        senders: this.o.settings.senders,
        remoteTools: this.o.settings.remoteTools,
        workspace: this.o.settings.workspace,
      },
      mediaRoot: paths.media,
      clock: this.clock,
      log: this.o.log,
    });
    this.loop = this.run(api, this.bridge, this.state);
  }

  /** Moves the chat's (or thread's) catch-up checkpoint; a message with an over-long identifier never makes a key. */
  private note(m: InboundMessage): void {
    if (!this.state || m.chat === null || oversizedField(m) !== null) return;
    const cp = this.state.checkpoint;
    const type = m.chatType ?? (m.kind === "direct" ? "p2p" : "group");
    const key = m.thread !== null ? `thread:${type}:${m.chat}:${m.thread}` : `${type}:${m.chat}`;
    cp[key] = Math.max(cp[key] ?? 0, m.timeMs);
    const keys = Object.keys(cp);
    if (keys.length > MAX_CHECKPOINT_CHATS) {
      keys.sort((a, b) => (cp[a] ?? 0) - (cp[b] ?? 0));
      for (const k of keys.slice(0, keys.length - MAX_CHECKPOINT_CHATS)) delete cp[k];
    }
  }

  private async handle(ev: unknown, bridge: ChatBridge): Promise<void> {
    const m = fromEvent(ev, this.botOpenId);
    if (!m) return;
    this.note(m);
    await bridge.accept([m]);
  }

  private async catchUp(api: FeishuApi, bridge: ChatBridge, state: DeliveryState): Promise<void> {
    const now = this.clock.now();
    const chats = Object.entries(state.checkpoint)
      .sort((a, b) => b[1] - a[1])
      .slice(0, CATCHUP_CHATS);
    for (const [key, since] of chats) {
      try {
        await (key.startsWith("thread:") ? this.catchUpThread(api, bridge, key, since) : this.catchUpChat(api, bridge, key, since, now));
      } catch (err) {
        // A chat the platform refuses for good (the bot was removed, the chat dissolved, no history scope) is skipped:
        // it must not keep the whole account from connecting. Anything transient fails this connect and is retried.
        if (!(err instanceof FeishuError && err.final)) throw err;
        this.o.log?.(`feishu catch-up: a chat was skipped (code ${err.code ?? "?"})`);
      }
    }
    await state.save();
  }

  /** A chat's history since the checkpoint (≤24 h back), oldest first, ≤4 pages. */
  private async catchUpChat(api: FeishuApi, bridge: ChatBridge, key: string, since: number, now: number): Promise<void> {
    const [chatType, chatId] = [key.slice(0, key.indexOf(":")), key.slice(key.indexOf(":") + 1)];
    const start = Math.floor(Math.max(since, now - CATCHUP_WINDOW_MS) / 1000);
    let pageToken = "";
    for (let page = 0; page < CATCHUP_PAGES; page++) {
      const q = new URLSearchParams({ container_id_type: "chat", container_id: chatId, start_time: String(start), sort_type: "ByCreateTimeAsc", page_size: "50" });
      if (pageToken) q.set("page_token", pageToken);
      const data = await api.call("GET", `/open-apis/im/v1/messages?${q.toString()}`);
      const items = Array.isArray(data["items"]) ? data["items"] : [];
      const batch: InboundMessage[] = [];
      for (const it of items) {
        const m = fromHistory(it, chatType, this.botOpenId);
        if (m && m.timeMs >= since) {
          batch.push(m);
          this.note(m);
        }
      }
      await bridge.accept(batch);
      pageToken = typeof data["page_token"] === "string" ? data["page_token"] : "";
      if (data["has_more"] !== true || pageToken === "") break;
    }
  }

  /** A thread's history has no time filter: newest first, one page, keep what is at or after the checkpoint. */
  private async catchUpThread(api: FeishuApi, bridge: ChatBridge, key: string, since: number): Promise<void> {
    const [, chatType = "group", , threadId = ""] = key.split(":");
    const q = new URLSearchParams({ container_id_type: "thread", container_id: threadId, sort_type: "ByCreateTimeDesc", page_size: "50" });
    const data = await api.call("GET", `/open-apis/im/v1/messages?${q.toString()}`);
    const items = Array.isArray(data["items"]) ? data["items"] : [];
    const batch: InboundMessage[] = [];
    for (const it of items) {
      const m = fromHistory(it, chatType, this.botOpenId);
      if (m && m.timeMs >= since) batch.unshift(m);
    }
    for (const m of batch) this.note(m);
    await bridge.accept(batch);
  }

  private async run(api: FeishuApi, bridge: ChatBridge, state: DeliveryState): Promise<void> {
    const signal = this.stopper.signal;
    const backoff = new Backoff();
    let recovered = false;
    while (!signal.aborted) {
      // Events that arrive during catch-up wait for it; when it fails they end (unacked: the platform re-pushes).
      let abandon: (() => void) | null = null;
      try {
        if (this.botOpenId === null) this.botOpenId = await api.botOpenId();
        const ep = await api.endpoint();
        let release!: () => void;
        const caughtUp = new Promise<void>((r, j) => {
          release = r;
          abandon = () => j(new Error("catch-up failed"));
        });
        caughtUp.catch(() => undefined);
        let ready = false;
        let carried = false;
        const socket = new FeishuSocket(
          ep.url,
          ep.pingIntervalS,
          async (ev) => {
            if (!ready) await caughtUp;
            await this.handle(ev, bridge);
            carried = true;
          },
          this.o.timers,
        );
        this.socket = socket;
        await socket.connect();
        this.connections++;
        if (signal.aborted) socket.close();
        if (!recovered) {
          await bridge.recover();
          recovered = true;
        }
        await this.catchUp(api, bridge, state);
        ready = true;
        release();
        const up = this.clock.now();
        this.health.success(up);
        const why = await socket.closed;
        if (signal.aborted) break;
        if (carried || this.clock.now() - up >= STABLE_LINK_MS) backoff.reset();
        this.health.set("disconnected", why === DEAD_LINK ? "the long connection stopped answering pings; reconnecting" : why === OVERSIZED_FRAME ? OVERSIZED_FRAME : "long connection closed");
        await this.clock.sleep(backoff.next(), signal);
      } catch (err) {
        this.socket?.close();
        (abandon as (() => void) | null)?.();
        if (signal.aborted) break;
        if (err instanceof FeishuError && err.kind === "credentials") {
          this.health.set("failed", needsLogin("feishu", this.o.account, this.o.credentials.brand));
          return;
        }
        this.health.set("backoff", sanitizeError(err instanceof Error ? err.message : "internal error"));
        this.health.restarts++;
        await this.clock.sleep(backoff.next(), signal);
      }
      if (!signal.aborted) this.health.set("starting");
    }
  }

  /** Simulates nothing: closes the socket so the component reconnects (used by `reload`). */
  dropConnection(): void {
    this.socket?.close("dropped");
  }

  async stop(): Promise<void> {
    this.health.set("stopping");
    this.stopper.abort();
    this.socket?.close();
    await this.loop;
    await this.bridge?.stop();
    this.health.set("stopped");
  }
}
