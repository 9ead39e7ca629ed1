/** Test doubles for the host: fake backends over the real Unix socket and a spec-derived AHP client. */
import { createConnection, type Socket } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { attachLineReader } from "../../src/transport/host-framing.js";
import { JsonRpcError, JsonRpcSuccess, RESULT_SCHEMAS, ServerNotification } from "../../src/protocols/host/ahp-schema.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { wsText } from "../../src/transport/ws-text.js";
import { z } from "zod";

export type Json = Record<string, any>;

export function tempHome(): string {
  return mkdtempSync(join(tmpdir(), "bh-"));
}

/** A Berth home whose settings point provider `fake` at a loopback fake provider. */
export function berthHomeFor(fake: { baseUrl: string }): string {
  const home = mkdtempSync(join(tmpdir(), "bh-berth-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  return home;
}

export async function withHost<T>(
  fn: (h: HostHandle) => Promise<T>,
  opts: { home?: string; inspectionHoldMs?: number; clientBytesBound?: number; backendBytesBound?: number; log?: (m: string) => void } = {},
): Promise<T> {
  const h = await startHost({
    home: opts.home ?? tempHome(),
    log: opts.log ?? (() => {}),
    ...(opts.inspectionHoldMs ? { inspectionHoldMs: opts.inspectionHoldMs } : {}),
    ...(opts.clientBytesBound ? { clientBytesBound: opts.clientBytesBound } : {}),
    ...(opts.backendBytesBound ? { backendBytesBound: opts.backendBytesBound } : {}),
  });
  try {
    return await fn(h);
  } finally {
    await h.close();
  }
}

/** The shortest deadline of any `until` wait (see there). */
const MIN_WAIT_MS = 60_000;

export async function until(pred: () => boolean, ms = 3000, what = "condition"): Promise<void> {
  // The deadline only ends a wait that is failing anyway. On a busy machine (CI beside other jobs) a condition that
  // holds can take far longer than the figure a test names, so no wait gives up before MIN_WAIT_MS.
  const deadline = Math.max(ms, MIN_WAIT_MS);
  const start = Date.now();
  while (!pred()) {
    if (Date.now() - start > deadline) throw new Error(`timed out waiting for ${what} (${deadline} ms)`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A scripted backend: sends raw frames, records every frame received. */
export class FakeBackend {
  readonly frames: Json[] = [];
  closed = false;
  private constructor(readonly sock: Socket) {
    attachLineReader(sock, { onFrame: (f) => this.frames.push(f), onError: () => {}, limit: 64 * 1024 * 1024 });
    sock.on("close", () => (this.closed = true));
    sock.on("error", () => {});
  }
  static connect(path: string): Promise<FakeBackend> {
    return new Promise((resolve, reject) => {
      const s = createConnection(path);
      s.once("connect", () => resolve(new FakeBackend(s)));
      s.once("error", reject);
    });
  }
  send(frame: unknown): void {
    this.sock.write(JSON.stringify(frame) + "\n");
  }
  raw(text: string | Buffer): void {
    this.sock.write(text);
  }
  async next(pred: (f: Json) => boolean, what = "frame", ms = 3000): Promise<Json> {
    let found: Json | undefined;
    await until(() => (found = this.frames.find(pred)) !== undefined, ms, what);
    this.frames.splice(this.frames.indexOf(found!), 1);
    return found!;
  }
  /**
   * A ping/pong round trip: the host handles a connection's frames in order, so once the pong is here
   * everything sent before the ping has been handled (and whatever the host sent back in response is in `frames`).
   */
  async roundTrip(): Promise<void> {
    const id = `rt-${++this.pings}`;
    this.send({ type: "ping", id });
    await this.next((f) => f.type === "pong" && f.id === id, "pong");
  }
  private pings = 0;
  nextType(type: string, ms = 3000): Promise<Json> {
    return this.next((f) => f.type === type, type, ms);
  }
  waitClosed(ms = 3000): Promise<void> {
    return until(() => this.closed, ms, "backend close");
  }
  close(): void {
    this.sock.destroy();
  }
  /** Dedicated session connection: hello → registered. */
  static async session(h: HostHandle, hello: Json): Promise<{ be: FakeBackend; reg: Json }> {
    const be = await FakeBackend.connect(h.backendSocket);
    be.send({ type: "hello", instanceId: "inst-1", provider: "pi", ...hello });
    const reg = await be.next((f) => f.type === "registered" || f.type === "error", "registered");
    return { be, reg };
  }
  /** Provider connection: provider_hello → provider_registered. */
  static async provider(h: HostHandle, version: number, providers = ["prov"], extra: Json = {}): Promise<{ be: FakeBackend; reg: Json }> {
    const be = await FakeBackend.connect(h.backendSocket);
    be.send({ type: "provider_hello", protocolVersion: version, instanceId: "pm-1", providers: providers.map((id) => ({ id, displayName: id })), ...extra });
    const reg = await be.next((f) => f.type === "provider_registered" || f.type === "error", "provider_registered");
    return { be, reg };
  }
}

/**
 * What the host may send on an `mcp://` side channel (spec "MCP side channels"; JSON-RPC 2.0 as
 * MCP uses it): a reply to the caller's request or a relayed notification, each carrying the
 * channel and nothing of the backend frame around it (no host UUID, session or route fields).
 */
const mcpChannel = z.string().regex(/^mcp:\/\//);
export const McpOnChannel = z.union([
  z.object({ jsonrpc: z.literal("2.0"), id: z.union([z.string(), z.number()]), result: z.record(z.string(), z.unknown()), channel: mcpChannel }).strict(),
  z.object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number(), z.null()]),
    error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).strict(),
    channel: mcpChannel,
  }).strict(),
  z.object({ jsonrpc: z.literal("2.0"), method: z.string().regex(/^notifications\//), params: z.record(z.string(), z.unknown()).optional(), channel: mcpChannel }).strict(),
]);

/** Minimal spec-derived AHP client; validates every message it receives against the derived schemas. */
export class AhpClient {
  private nextId = 1;
  private waiting = new Map<number, { method: string; resolve: (m: Json) => void }>();
  readonly notes: Json[] = [];
  readonly invalid: string[] = [];
  /** Every MCP message received on an `mcp://` side channel, validated as MCP (not AHP). */
  readonly mcp: Json[] = [];
  clientSeq = 0;
  closed = false;
  /** The close frame's code and reason, once closed (1006 and "" when none came). */
  closeCode = 0;
  closeReason = "";
  private constructor(readonly ws: WebSocket) {
    ws.on("message", (d) => this.onMessage(wsText(d)));
    ws.on("close", (code, reason) => {
      this.closed = true;
      this.closeCode = code;
      this.closeReason = reason.toString("utf8");
    });
  }
  static open(h: HostHandle, opts: { query?: boolean; token?: string } = {}): Promise<AhpClient> {
    const token = opts.token ?? h.token;
    const url = opts.query ? `${h.ahpUrl}?tkn=${encodeURIComponent(token)}` : h.ahpUrl;
    const ws = new WebSocket(url, opts.query ? {} : { headers: { authorization: `Bearer ${token}` } });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(new AhpClient(ws)));
      ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      ws.once("error", reject);
    });
  }
  static async init(h: HostHandle, subs: string[] = ["ahp-root://"], clientId = "c1"): Promise<{ c: AhpClient; result: Json }> {
    const c = await AhpClient.open(h);
    const r = await c.request("initialize", { channel: "ahp-root://", protocolVersions: ["1.0.0"], clientId, initialSubscriptions: subs });
    if (r.error) throw new Error(`initialize failed: ${JSON.stringify(r.error)}`);
    return { c, result: r.result };
  }
  private onMessage(text: string): void {
    const m = JSON.parse(text) as Json;
    if (typeof m.channel === "string" && m.channel.startsWith("mcp://")) {
      // MCP JSON-RPC on a side channel, not an AHP message (its IDs are the caller's own).
      const v = McpOnChannel.safeParse(m);
      if (!v.success) this.invalid.push(`MCP message: ${JSON.stringify(v.error.issues[0])} in ${text.slice(0, 300)}`);
      this.mcp.push(m);
      return;
    }
    if (m.id !== undefined && m.id !== null && !m.method) {
      const w = this.waiting.get(m.id as number);
      if (m.error) {
        const v = JsonRpcError.safeParse(m);
        if (!v.success) this.invalid.push(`error response: ${v.error.message}`);
      } else {
        const v = JsonRpcSuccess.safeParse(m);
        if (!v.success) this.invalid.push(`response: ${v.error.message}`);
        const schema = w ? RESULT_SCHEMAS[w.method] : undefined;
        if (schema) {
          const r = schema.safeParse(m.result);
          if (!r.success) this.invalid.push(`${w!.method} result: ${JSON.stringify(r.error.issues[0])}`);
        }
      }
      if (w) {
        this.waiting.delete(m.id as number);
        w.resolve(m);
      }
      return;
    }
    if (m.method) {
      const v = ServerNotification.safeParse(m);
      if (!v.success) this.invalid.push(`notification ${String(m.method)}: ${JSON.stringify(v.error.issues[0])} in ${text.slice(0, 300)}`);
      this.notes.push(m);
      return;
    }
    if (m.error) this.notes.push(m);
  }
  request(method: string, params: Json = {}, ms = 5000): Promise<Json> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // Like `until`: a loaded machine can answer far later than the figure named; the deadline only ends a failing wait.
      const deadline = Math.max(ms, MIN_WAIT_MS);
      const t = setTimeout(() => reject(new Error(`${method} timed out (${deadline} ms)`)), deadline);
      this.waiting.set(id, {
        method,
        resolve: (m) => {
          clearTimeout(t);
          resolve(m);
        },
      });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
  dispatch(channel: string, action: Json): number {
    const clientSeq = ++this.clientSeq;
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "dispatchAction", params: { channel, clientSeq, action } }));
    return clientSeq;
  }
  actions(channel?: string): Json[] {
    return this.notes.filter((n) => n.method === "action" && (channel === undefined || n.params.channel === channel)).map((n) => n.params);
  }
  async action(pred: (env: Json) => boolean, what = "action", ms = 3000): Promise<Json> {
    let found: Json | undefined;
    await until(() => (found = this.actions().find(pred)) !== undefined, ms, what);
    return found!;
  }
  async note(method: string, pred: (p: Json) => boolean = () => true, ms = 3000): Promise<Json> {
    let found: Json | undefined;
    await until(() => (found = this.notes.find((n) => n.method === method && pred(n.params))) !== undefined, ms, method);
    return found!.params;
  }
  close(): void {
    this.ws.close();
  }
}
