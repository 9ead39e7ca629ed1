/**
 * `openai-codex` turns use the stored OAuth credential through the OpenAI Responses client:
 * bearer access token + `chatgpt-account-id`, endpoint overridable with BERTH_OPENAI_CODEX_BASE_URL.
 * An expired token is refreshed internally (token endpoint of BERTH_OPENAI_AUTH_ISSUER) before the turn.
 * @req AUTH-TURN-01
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthStore } from "../../src/store/auth/auth-store.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { waitTerminal } from "./helpers.js";

const ACCESS = "codex-access-SECRETMARKER-1";
const REFRESH = "codex-refresh-SECRETMARKER-2";
const ACCOUNT = "acct-123";

async function runCodexTurn(expiresAt: number, issuer?: string) {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "berth-codex-"));
  const store = new AuthStore(home);
  const gen = (await store.read()).generation("openai-codex");
  assert.equal(await store.commitOAuth("openai-codex", gen, { type: "oauth", access: ACCESS, refresh: REFRESH, expires_at: expiresAt, account_id: ACCOUNT }), "committed");
  const svc = new ServiceProcess({
    home,
    env: { MC_PROVIDER: "openai-codex", MC_MODEL: "gpt-5-codex", BERTH_OPENAI_CODEX_BASE_URL: fake.baseUrl, ...(issuer ? { BERTH_OPENAI_AUTH_ISSUER: issuer } : {}) },
  });
  await svc.initialize();
  const st = await svc.request("status", {});
  assert.equal(st.payload.provider_auth_ready, true);
  const r = await svc.request("turn.start", { prompt: "hello codex" }, {}, "t1");
  assert.equal(r.error, null);
  const events = await waitTerminal(svc, "t1");
  const terminal = events.at(-1)!;
  svc.end();
  await svc.exited;
  await fake.close();
  return { fake, terminal, svc, home };
}

it("a codex turn sends the stored bearer token and account id to the Responses endpoint", async () => {
  const { fake, terminal, svc, home } = await runCodexTurn(Date.now() + 3_600_000);
  assert.equal(terminal.payload.status, "completed");
  assert.equal(terminal.payload.assistant_text, "echo: hello codex");
  const req = fake.requests.find((q) => q.api === "openai-responses")!;
  assert.ok(req, "the Responses endpoint was called");
  assert.equal(req.path, "/responses");
  assert.equal(req.headers.authorization, `Bearer ${ACCESS}`);
  assert.equal(req.headers["chatgpt-account-id"], ACCOUNT);
  assert.equal((req.json as { model: string }).model, "gpt-5-codex");
  for (const text of [svc.stderr, svc.lines.join("\n"), ...readdirSync(join(home, "sessions")).map((f) => readFileSync(join(home, "sessions", f), "utf8"))])
    assert.ok(!text.includes("SECRETMARKER"), "no credential reaches output or session files");
});

it("an expired codex token is refreshed internally before the turn", async () => {
  const NEW_ACCESS = "codex-access-SECRETMARKER-3";
  let refreshed = 0;
  const issuer = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      if (req.url === "/oauth/token" && body.includes("grant_type=refresh_token") && body.includes(REFRESH)) {
        refreshed++;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ access_token: NEW_ACCESS, refresh_token: "codex-refresh-SECRETMARKER-4", expires_in: 3600, token_type: "Bearer" }));
      } else {
        res.writeHead(400, { "content-type": "application/json" });
        res.end("{}");
      }
    });
  });
  await new Promise<void>((r) => issuer.listen(0, "127.0.0.1", r));
  const port = (issuer.address() as { port: number }).port;
  try {
    const { fake, terminal } = await runCodexTurn(Date.now() - 1000, `http://127.0.0.1:${port}`);
    assert.equal(refreshed, 1, "one refresh request");
    assert.equal(terminal.payload.status, "completed");
    const req = fake.requests.find((q) => q.api === "openai-responses")!;
    assert.equal(req.headers.authorization, `Bearer ${NEW_ACCESS}`);
  } finally {
    issuer.close();
  }
});
