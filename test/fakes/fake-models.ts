/**
 * A loopback fake models endpoint answering any GET path ending in `/models`
 * (Anthropic `/v1/models`, OpenAI-compatible `/models`, Codex `/models`).
 * Modes: `fresh` (the configured list), `slow` (never answers until closed), `failing` (500),
 * `malformed` (invalid JSON). Records request paths and whether credentials were presented.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type ModelsMode = "fresh" | "slow" | "failing" | "malformed";

export class FakeModelsServer {
  mode: ModelsMode = "fresh";
  /** Body for `fresh`: served as `{ data: models }`. */
  models: unknown[] = [];
  readonly requests: { path: string; auth: string | null; apiKey: string | null; account: string | null }[] = [];

  private constructor(private readonly server: Server, readonly url: string) {}

  static async start(): Promise<FakeModelsServer> {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const fake = new FakeModelsServer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on("request", (req, res) => {
      const path = new URL(req.url ?? "/", fake.url).pathname;
      fake.requests.push({
        path,
        auth: req.headers["authorization"] ?? null,
        apiKey: (req.headers["x-api-key"] as string | undefined) ?? null,
        account: (req.headers["chatgpt-account-id"] as string | undefined) ?? null,
      });
      if (req.method !== "GET" || !path.endsWith("/models")) return void res.writeHead(404).end();
      if (fake.mode === "slow") return; // held open until close()
      if (fake.mode === "failing") return void res.writeHead(500, { "content-type": "application/json" }).end('{"error":"boom SECRETMARKER"}');
      if (fake.mode === "malformed") return void res.writeHead(200, { "content-type": "application/json" }).end("{not json");
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: fake.models, has_more: false }));
    });
    return fake;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
