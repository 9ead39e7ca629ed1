/**
 * A loopback fake provider (node:http on 127.0.0.1) speaking the three provider wire formats
 * from scripted turns. Routes: POST …/v1/messages (Anthropic), POST …/responses (OpenAI
 * Responses), POST …/chat/completions (Chat Completions), GET …/v1/models and …/models.
 *
 * Scripted turns are consumed FIFO by POSTs of any format. With no scripted turn left, the
 * default turn echoes the last user text (`echo: <text>`), or, when that text starts with
 * `long answer [N]`, streams N (default 20000: fits the 4 MiB response bound on every wire) one-word deltas.
 *
 * Standalone: `node dist/test/fakes/fake-provider.js` prints `{"port":N}` and serves; env
 * FAKE_PROVIDER_SCRIPT names a JSON file holding an array of turns or `{"turns": [...], "loop": true}`;
 * FAKE_PROVIDER_PORT picks the port (default 0).
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import * as zlib from "node:zlib";
import { ERROR_BODY_SECRET, renderTurn, type FakeApi, type FakeTurn, type WireItem } from "./provider-wire.js";

export type { FakeApi, FakeStep, FakeTurn, FakeToolCall, FakeUsage } from "./provider-wire.js";
export { ERROR_BODY_SECRET } from "./provider-wire.js";

export interface RecordedRequest {
  method: string;
  path: string;
  /** All request headers, credentials included, so tests can assert what arrived. */
  headers: IncomingHttpHeaders;
  body: string;
  /** Parsed JSON body, or undefined. */
  json: unknown;
  api: FakeApi | "models" | "unknown";
  /** Resolves when the request's socket closes (used to assert a cancelled stream closed it). */
  socketClosed: Promise<void>;
  /** The client's port: equal for two requests that came over one kept-alive connection. */
  remotePort: number | undefined;
}

export interface FakeProvider {
  baseUrl: string;
  port: number;
  /** Appends scripted turns. */
  script(turns: FakeTurn[]): void;
  /** Drops the scripted turns no request consumed yet; returns how many there were. */
  unscript(): number;
  readonly requests: RecordedRequest[];
  /** Resolves once at least `n` requests were received. */
  waitForRequests(n: number): Promise<RecordedRequest[]>;
  /** Models served by GET …/models (entries passed through as given, extra fields kept). */
  setModels(models: Record<string, unknown>[], opts?: { status?: number; pageSize?: number }): void;
  close(): Promise<void>;
}

export interface FakeProviderOptions {
  port?: number;
  /** Turn used when no scripted turn is queued. */
  defaultTurn?: (api: FakeApi, json: unknown) => FakeTurn;
  /** Scripted turns are reused cyclically instead of being consumed. */
  loop?: boolean;
}

function apiOf(method: string, path: string): RecordedRequest["api"] {
  if (method === "GET" && /\/models$/.test(path)) return "models";
  if (method !== "POST") return "unknown";
  if (path.endsWith("/v1/messages")) return "anthropic";
  if (path.endsWith("/responses")) return "openai-responses";
  if (path.endsWith("/chat/completions")) return "openai-chat";
  return "unknown";
}

/** The last user text of a request body in any of the three formats. */
export function lastUserText(json: unknown): string {
  if (typeof json !== "object" || json === null) return "";
  const o = json as Record<string, unknown>;
  const list = (o["messages"] ?? o["input"]);
  if (!Array.isArray(list)) return "";
  for (let i = list.length - 1; i >= 0; i--) {
    const m = list[i] as Record<string, unknown> | null;
    if (m === null || typeof m !== "object" || m["role"] !== "user") continue;
    const c = m["content"];
    if (typeof c === "string") return c;
    if (Array.isArray(c)) {
      const texts = c.flatMap((p: unknown) => {
        const part = p as Record<string, unknown>;
        return (part["type"] === "text" || part["type"] === "input_text") && typeof part["text"] === "string" ? [part["text"]] : [];
      });
      if (texts.length > 0) return texts.join("");
    }
  }
  return "";
}

export function defaultTurn(_api: FakeApi, json: unknown): FakeTurn {
  const text = lastUserText(json);
  const m = /^long answer(?:\s+(\d+))?/.exec(text);
  if (m !== null) {
    const n = Math.min(Number(m[1] ?? 20_000), 5_000_000);
    return { steps: [{ text: "word ".repeat(n), chunks: n }], usage: { input: 10, output: n } };
  }
  const reply = `echo: ${text}`;
  return { steps: [{ text: reply, chunks: Math.min(3, Math.max(1, reply.length)) }] };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function closedPromise(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) resolve();
    else res.once("close", () => resolve());
  });
}

/** A compressor for `coding` (gzip, x-gzip, deflate, br), or null: any other coding is sent as is under its name. */
function compressor(name: string | undefined): zlib.Gzip | zlib.Deflate | zlib.BrotliCompress | null {
  const coding = name?.toLowerCase();
  if (coding === "gzip" || coding === "x-gzip") return zlib.createGzip();
  if (coding === "deflate") return zlib.createDeflate();
  if (coding === "br") return zlib.createBrotliCompress();
  return null;
}

/** `body` compressed whole for `coding` (see `compressor`). */
function compressed(name: string | undefined, body: string): string | Buffer {
  const coding = name?.toLowerCase();
  if (coding === "gzip" || coding === "x-gzip") return zlib.gzipSync(body);
  if (coding === "deflate") return zlib.deflateSync(body);
  if (coding === "br") return zlib.brotliCompressSync(body);
  return body;
}

/**
 * Writes rendered items with coalescing, backpressure and the control actions; with `z`, through that compressor
 * (piped to `res`), flushed at each write so every event reaches the client as it is written.
 */
async function writeItems(res: ServerResponse, items: WireItem[], chunkDelayMs: number, closed: Promise<void>, z: ReturnType<typeof compressor> = null): Promise<void> {
  const out = z ?? res;
  if (z !== null) z.pipe(res);
  let gone = false;
  void closed.then(() => {
    gone = true;
  });
  let buf = "";
  let lastWrite: Promise<void> = Promise.resolve();
  const flush = async (): Promise<void> => {
    if (buf.length === 0 || gone) return;
    const data = buf;
    buf = "";
    const ok = out.write(data);
    lastWrite = z !== null ? new Promise((r) => z.flush(() => r())) : new Promise((r) => res.write("", () => r()));
    if (!ok) await Promise.race([new Promise((r) => out.once("drain", r)), closed]);
  };
  for (const it of items) {
    if (gone) return;
    if (typeof it === "string") {
      if (chunkDelayMs > 0) {
        await flush();
        await new Promise((r) => setTimeout(r, chunkDelayMs));
      }
      buf += it;
      if (buf.length >= 64 * 1024 || chunkDelayMs > 0) await flush();
    } else if ("delayMs" in it) {
      await flush();
      await new Promise((r) => setTimeout(r, it.delayMs));
    } else if ("hold" in it) {
      await flush();
      await Promise.race([it.hold, closed]);
    } else if ("disconnect" in it) {
      await flush();
      await lastWrite;
      res.socket?.destroy();
      return;
    } else {
      await flush();
      await closed;
      return;
    }
  }
  await flush();
  if (!gone) out.end();
}

export async function startFakeProvider(opts: FakeProviderOptions = {}): Promise<FakeProvider> {
  const turns: FakeTurn[] = [];
  let loopIndex = 0;
  const requests: RecordedRequest[] = [];
  const waiters: { n: number; resolve: (r: RecordedRequest[]) => void }[] = [];
  let models: Record<string, unknown>[] = [{ id: "fake-model", display_name: "Fake Model", context_window: 32768 }];
  let modelsStatus = 200;
  let pageSize = 1000;
  const makeDefault = opts.defaultTurn ?? defaultTurn;

  const nextTurn = (api: FakeApi, json: unknown): FakeTurn => {
    if (opts.loop === true && turns.length > 0) return turns[loopIndex++ % turns.length] as FakeTurn;
    return turns.shift() ?? makeDefault(api, json);
  };

  const serveModels = (req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams): void => {
    if (modelsStatus !== 200) {
      res.writeHead(modelsStatus, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: ERROR_BODY_SECRET } }));
      return;
    }
    let body: unknown;
    if (req.headers["anthropic-version"] !== undefined && path.endsWith("/v1/models")) {
      const after = query.get("after_id");
      const start = after === null ? 0 : models.findIndex((m) => m["id"] === after) + 1;
      const page = models.slice(start, start + pageSize).map((m): Record<string, unknown> => ({ type: "model", created_at: "2025-01-01T00:00:00Z", ...m }));
      body = {
        data: page,
        has_more: start + pageSize < models.length,
        first_id: page[0]?.["id"] ?? null,
        last_id: page[page.length - 1]?.["id"] ?? null,
      };
    } else {
      body = { object: "list", data: models.map((m) => ({ object: "model", created: 0, owned_by: "fake", ...m })) };
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const method = req.method ?? "GET";
    const body = await readBody(req);
    let json: unknown;
    try {
      json = body.length > 0 ? JSON.parse(body) : undefined;
    } catch {
      json = undefined;
    }
    const api = apiOf(method, url.pathname);
    const closed = closedPromise(res);
    const rec: RecordedRequest = { method, path: url.pathname + url.search, headers: req.headers, body, json, api, socketClosed: closed, remotePort: req.socket.remotePort };
    requests.push(rec);
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i];
      if (w !== undefined && requests.length >= w.n) {
        waiters.splice(i, 1);
        w.resolve(requests.slice());
      }
    }
    if (api === "models") return serveModels(req, res, url.pathname, url.searchParams);
    if (api === "unknown") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":{"message":"not found"}}');
      return;
    }
    const turn = nextTurn(api, json);
    if (turn.resetBeforeHeaders === true) {
      req.socket.destroy();
      return;
    }
    if (turn.waitForAbortBeforeHeaders === true) {
      await closed;
      return;
    }
    const coding = turn.contentEncoding;
    const encoding = coding !== undefined ? { "content-encoding": coding } : {};
    if (turn.status !== undefined && (turn.status < 200 || turn.status > 299)) {
      res.writeHead(turn.status, { "content-type": "application/json", ...encoding, ...turn.headers });
      res.end(compressed(coding, turn.body ?? JSON.stringify({ error: { type: "fake_error", message: ERROR_BODY_SECRET } })));
      return;
    }
    if (turn.body !== undefined) {
      res.writeHead(turn.status ?? 200, { "content-type": "text/event-stream", ...encoding, ...turn.headers });
      res.end(compressed(coding, turn.body));
      return;
    }
    const items = renderTurn(api, turn);
    res.writeHead(turn.status ?? 200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...encoding, ...turn.headers });
    res.flushHeaders();
    await writeItems(res, items, turn.chunkDelayMs ?? 0, closed, compressor(coding));
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.destroy();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    script: (t) => void turns.push(...t),
    unscript: () => turns.splice(0).length,
    requests,
    waitForRequests: (n) =>
      requests.length >= n ? Promise.resolve(requests.slice()) : new Promise((resolve) => waiters.push({ n, resolve })),
    setModels: (m, o = {}) => {
      models = m;
      modelsStatus = o.status ?? 200;
      pageSize = o.pageSize ?? 1000;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function loadScript(path: string): { turns: FakeTurn[]; loop: boolean } {
  const v = JSON.parse(readFileSync(path, "utf8")) as unknown;
  if (Array.isArray(v)) return { turns: v as FakeTurn[], loop: false };
  const o = v as { turns?: FakeTurn[]; loop?: boolean };
  return { turns: o.turns ?? [], loop: o.loop === true };
}

async function main(): Promise<void> {
  const file = process.env["FAKE_PROVIDER_SCRIPT"];
  const script = file !== undefined && file.length > 0 ? loadScript(file) : { turns: [], loop: false };
  const fake = await startFakeProvider({ port: Number(process.env["FAKE_PROVIDER_PORT"] ?? 0), loop: script.loop });
  fake.script(script.turns);
  process.stdout.write(`${JSON.stringify({ port: fake.port })}\n`);
  const stop = (): void => {
    fake.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch(() => process.exit(1));
}
