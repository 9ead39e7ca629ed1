/**
 * Browser AHP client: one WebSocket to the daemon that served this page, the shared JSON-RPC
 * connection (`src/transport/jsonrpc.ts`, one per socket), the last seen `serverSeq`, and
 * reconnection with `reconnect` (replay, or snapshots when the gap is too old). The token travels
 * only as a WebSocket sub-protocol value, never in a URL, and only to a server that first proved it holds it
 * (`verifyServer`, core/ui-proof.ts).
 *
 * Contract for the owner (model.ts): `onInit` receives the snapshots of a fresh `initialize`;
 * `onReconnect` a `reconnect` result; `onEnvelope` every action envelope in serverSeq order;
 * `onRootNotification` root/session* notifications; `onStatus` every connection state change.
 */
import { JsonRpcConnection, JsonRpcError } from "../../src/transport/jsonrpc.js";
import { uiProofMessage } from "../../src/core/ui-proof.js";

export type Json = Record<string, unknown>;
export type ConnStatus = "connecting" | "open" | "closed";

export interface Envelope {
  channel: string;
  action: Json & { type: string };
  serverSeq: number;
  origin?: { clientId: string; clientSeq: number };
  rejectionReason?: string;
}
export interface Snapshot {
  resource: string;
  state: Json;
  fromSeq: number;
}

export interface AhpHandlers {
  onInit(snapshots: Snapshot[]): void;
  /** `gone`: channels subscribed before that exist no more (removed while the page was away). */
  onReconnect(result: { type: "replay"; actions: Envelope[]; missing: string[] } | { type: "snapshot"; snapshots: Snapshot[] }, gone: string[]): void;
  onEnvelope(env: Envelope): void;
  onRootNotification(method: string, params: Json): void;
  onStatus(status: ConnStatus, detail?: string): void;
  /** A client action that could not be sent (no open connection): the user must hear of it, or it is lost silently. */
  onNotSent(action: Json & { type: string }): void;
}

export const ROOT = "ahp-root://";
const AHP_SUBPROTOCOL = "berth-ahp";
const TOKEN_SUBPROTOCOL_PREFIX = "berth-token.";
const BACKOFF_MS = [250, 500, 1000, 2000, 5000];
/** A socket is probed this often, and on `online` / the page becoming visible (a waking laptop). */
const HEARTBEAT_MS = 30_000;
/** A probe unanswered this long means the connection is dead even if the socket says open. */
const PROBE_TIMEOUT_MS = 5_000;

export class AhpClient {
  readonly clientId = crypto.randomUUID();
  /** Channels this client wants; re-subscribed by `reconnect`. */
  readonly subscriptions = new Set<string>([ROOT]);
  lastSeq = 0;
  status: ConnStatus = "connecting";
  private ws: WebSocket | null = null;
  private rpc: JsonRpcConnection | null = null;
  private clientSeq = 0;
  private initialized = false;
  private attempts = 0;
  private stopped = false;
  private probing = false;
  private proofKey: Promise<CryptoKey> | null = null;

  constructor(
    private readonly token: string,
    private readonly h: AhpHandlers,
    private readonly url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ahp`,
  ) {}

  /** Start probing for dead connections; call once. */
  watchLiveness(): void {
    setInterval(() => void this.probe(), HEARTBEAT_MS);
    addEventListener("online", () => void this.probe());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") void this.probe();
    });
  }

  /** Ping; if no answer arrives in time, drop the socket and reconnect. */
  async probe(): Promise<void> {
    const ws = this.ws;
    if (!ws || this.status !== "open" || this.probing) return;
    this.probing = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), PROBE_TIMEOUT_MS)));
    try {
      const r = await Promise.race([this.request("ping", {}).then(() => "ok" as const, () => "error" as const), timeout]);
      if (r === "timeout" && this.ws === ws) this.dropped(ws, "no answer from the daemon");
    } finally {
      clearTimeout(timer);
      this.probing = false;
    }
  }

  /** Forget `ws` (its close may never complete on a dead link) and start reconnecting. */
  private dropped(ws: WebSocket, detail: string): void {
    if (this.ws !== ws) return;
    this.ws = null;
    this.rpc?.close("connection lost");
    this.rpc = null;
    this.setStatus("closed", detail);
    try {
      ws.close();
    } catch {
      /* already closing */
    }
    this.retry();
  }

  connect(): void {
    this.setStatus("connecting");
    void this.verifyServer().then((problem) => {
      if (this.stopped) return;
      if (problem === null) return this.open();
      this.setStatus("closed", problem);
      this.retry();
    });
  }

  /**
   * Null when the server at this page's address proves it holds the token (core/ui-proof.ts), else why the token is
   * not sent to it: after the daemon stopped, another local user's program may listen on its port.
   */
  private async verifyServer(): Promise<string | null> {
    // No WebCrypto outside a secure context: a non-loopback --listen over plain HTTP, where the token crosses the
    // network in the clear anyway (docs/ui.md).
    if (globalThis.crypto?.subtle === undefined) return null;
    const nonce = base64url(crypto.getRandomValues(new Uint8Array(24)));
    const port = Number(location.port || (location.protocol === "https:" ? 443 : 80));
    // The expected proof is computed while the request is under way.
    this.proofKey ??= crypto.subtle.importKey("raw", new TextEncoder().encode(this.token), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const expected = this.proofKey.then(async (key) => base64url(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(uiProofMessage(port, nonce))))));
    let proof: unknown;
    try {
      const r = await fetch(`/ui-proof?nonce=${nonce}`, { cache: "no-store" });
      proof = r.ok ? ((await r.json()) as { proof?: unknown }).proof : undefined;
    } catch {
      return NOT_LISTENING;
    }
    return proof === (await expected) ? null : NOT_PROVEN;
  }

  private open(): void {
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.url, [AHP_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX + this.token]);
    } catch (e) {
      this.setStatus("closed", String(e));
      return this.retry();
    }
    this.ws = ws;
    const rpc = new JsonRpcConnection((text) => ws.send(text), {
      onRequest: (method, params, notification) => {
        if (!notification) throw new JsonRpcError(-32601, `unknown method ${method}`);
        if (method === "action") {
          const env = params as unknown as Envelope;
          if (env.serverSeq > this.lastSeq) this.lastSeq = env.serverSeq;
          this.h.onEnvelope(env);
        } else this.h.onRootNotification(method, params);
        return null;
      },
    });
    this.rpc = rpc;
    ws.onopen = () => {
      performance.mark("berth:ws-open");
      void this.handshake(ws);
    };
    // Notifications are handled synchronously inside receive(), so envelopes keep their order.
    ws.onmessage = (ev) => void rpc.receive(typeof ev.data === "string" ? ev.data : "");
    ws.onclose = (ev) => this.dropped(ws, closeReason(ev));
  }

  /** Drop the socket without retrying (page unload). */
  stop(): void {
    this.stopped = true;
    this.ws?.close();
  }

  private retry(): void {
    if (this.stopped) return;
    const delay = BACKOFF_MS[Math.min(this.attempts++, BACKOFF_MS.length - 1)]!;
    setTimeout(() => this.connect(), delay);
  }

  private setStatus(s: ConnStatus, detail?: string): void {
    this.status = s;
    this.h.onStatus(s, detail);
  }

  private async handshake(ws: WebSocket): Promise<void> {
    try {
      if (!this.initialized) {
        const r = (await this.timed("initialize", {
          protocolVersions: ["1.0.0"],
          clientId: this.clientId,
          clientInfo: { name: "berth-web-ui" },
          initialSubscriptions: [...this.subscriptions],
        })) as { serverSeq: number; snapshots: Snapshot[] };
        this.initialized = true;
        performance.mark("berth:initialized");
        this.lastSeq = r.serverSeq;
        this.h.onInit(r.snapshots);
      } else {
        const r = (await this.timed("reconnect", {
          clientId: this.clientId,
          lastSeenServerSeq: this.lastSeq,
          subscriptions: [...this.subscriptions],
        })) as { type: "replay"; actions: Envelope[]; missing: string[] } | { type: "snapshot"; snapshots: Snapshot[] };
        if (r.type === "replay") for (const e of r.actions) this.lastSeq = Math.max(this.lastSeq, e.serverSeq);
        else for (const s of r.snapshots) this.lastSeq = Math.max(this.lastSeq, s.fromSeq);
        // A channel removed meanwhile is named in `missing` (replay) or has no snapshot (snapshot answer).
        const held = r.type === "snapshot" ? new Set(r.snapshots.map((s) => s.resource)) : null;
        const gone = r.type === "replay" ? r.missing : [...this.subscriptions].filter((u) => !held!.has(u));
        for (const m of gone) this.subscriptions.delete(m);
        this.h.onReconnect(r, gone);
      }
      if (this.ws !== ws) return;
      this.attempts = 0;
      this.setStatus("open");
    } catch (e) {
      this.dropped(ws, e instanceof Error ? e.message : String(e));
    }
  }

  /** A request that fails if unanswered within PROBE_TIMEOUT_MS (a dead link never answers). */
  private timed(method: string, params: Json): Promise<unknown> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      this.request(method, params),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("no answer from the daemon")), PROBE_TIMEOUT_MS))),
    ]).finally(() => clearTimeout(timer));
  }

  request(method: string, params: Json): Promise<unknown> {
    const ws = this.ws;
    if (!ws || !this.rpc || ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error("not connected"));
    return this.rpc.request(method, params);
  }

  /** Send a client action; its effect arrives as the server's echo envelope. */
  dispatch(channel: string, action: Json & { type: string }): boolean {
    const ws = this.ws;
    if (!ws || !this.rpc || ws.readyState !== WebSocket.OPEN || this.status !== "open") {
      this.h.onNotSent(action);
      return false;
    }
    this.rpc.notify("dispatchAction", { channel, clientSeq: ++this.clientSeq, action });
    return true;
  }

  async subscribe(channel: string): Promise<Snapshot | undefined> {
    const r = (await this.request("subscribe", { channel })) as { snapshot?: Snapshot };
    this.subscriptions.add(channel);
    // The snapshot holds the channel's envelopes up to its fromSeq, and `reconnect` replays every subscribed channel
    // from one number: left at an older envelope's, it replayed this channel's turns onto the snapshot, twice over
    // (docs/host.md: send the newest of the serverSeqs and fromSeqs applied). Nothing on a channel already held is
    // newer unseen: the daemon sent those envelopes before this answer, on this socket.
    if (r.snapshot && r.snapshot.fromSeq > this.lastSeq) this.lastSeq = r.snapshot.fromSeq;
    return r.snapshot;
  }

  unsubscribe(channel: string): void {
    this.subscriptions.delete(channel);
    if (this.ws?.readyState === WebSocket.OPEN) this.rpc?.notify("unsubscribe", { channel });
  }
}

/**
 * Why the page does not connect when the server at its address cannot prove it holds the page's token. Before the
 * page ever connected, that means the token in its URL is wrong (the page says so, app.tsx); later, that another
 * program took the port, or the daemon was started again with a new token.
 */
export const NOT_PROVEN =
  "the server now at this address is not the daemon that served this page: it cannot prove it holds the token, so the token was not sent to it (if the daemon was started again with a new token, open the URL it printed, or run `berth open`)";

/** Why the page is disconnected when nothing accepts a connection at its address, and what brings it back. */
const NOT_LISTENING = "nothing answers at this address; if the daemon stopped, start it again with `berth daemon` or `berth open`";

/** A socket's close, for the banner: a stopped daemon says so (1001), a reset is a lost connection. */
function closeReason(ev: CloseEvent): string {
  if (ev.code === 1001) return "the daemon shut down";
  if (ev.code === 1006) return "connection lost";
  return `closed (${ev.code}${ev.reason ? `: ${ev.reason.slice(0, 200)}` : ""})`;
}

/** Base64url without padding, as node:crypto's `digest("base64url")`. */
function base64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}
