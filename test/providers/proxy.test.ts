/**
 * HTTPS_PROXY (providers/proxy.ts): an https: provider is reached through the proxy's CONNECT tunnel, with TLS checked
 * end to end; loopback and NO_PROXY hosts go direct. Driven end to end through `berth stdio` against a loopback
 * CONNECT proxy that maps the provider's name (never resolved by Berth) to a loopback TLS server whose certificate
 * comes from a test CA the child trusts (NODE_EXTRA_CA_CERTS).
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { connectTunnel, httpsProxyFor, isLoopback, noProxyMatches } from "../../src/runtime/providers/proxy.js";
import { TEST_CA_PEM, TEST_LEAF_CERT_PEM, TEST_LEAF_KEY_PEM } from "../fixtures/tls.js";
import { chatSse } from "../helpers/chat-sse.js";
import { loopbackProxy, type LoopbackProxy } from "../helpers/loopback-proxy.js";
import { spawnStdio } from "../scv/client.js";

test("which hosts go through HTTPS_PROXY: loopback never, NO_PROXY entries by name, suffix, port and IP", () => {
  for (const h of ["localhost", "api.localhost", "127.0.0.1", "127.8.9.10", "::1", "0:0:0:0:0:0:0:1"]) assert.equal(isLoopback(h), true, h);
  for (const h of ["128.0.0.1", "api.openai.com", "::2", "localhost.example.com"]) assert.equal(isLoopback(h), false, h);
  const list = "internal.example, .corp.test,10.1.2.3 api.vendor.test:8443, [fd00::1]:443";
  assert.equal(noProxyMatches("internal.example", 443, list), true);
  assert.equal(noProxyMatches("a.b.internal.example", 443, list), true);
  assert.equal(noProxyMatches("notinternal.example", 443, list), false);
  assert.equal(noProxyMatches("x.corp.test", 443, list), true);
  assert.equal(noProxyMatches("10.1.2.3", 443, list), true);
  assert.equal(noProxyMatches("api.vendor.test", 8443, list), true);
  assert.equal(noProxyMatches("api.vendor.test", 443, list), false);
  assert.equal(noProxyMatches("fd00::1", 443, list), true);
  assert.equal(noProxyMatches("anything.test", 443, "*"), true);

  const env = { HTTPS_PROXY: "http://u%40x:p%3Ass@proxy.corp:3128", NO_PROXY: "internal.example" };
  assert.deepEqual(httpsProxyFor("api.openai.com", 443, env), { host: "proxy.corp", port: 3128, authorization: `Basic ${Buffer.from("u@x:p:ss").toString("base64")}` });
  assert.equal(httpsProxyFor("internal.example", 443, env), null);
  assert.equal(httpsProxyFor("127.0.0.1", 443, env), null);
  assert.deepEqual(httpsProxyFor("api.openai.com", 443, { https_proxy: "proxy.corp:8080", HTTPS_PROXY: "http://ignored:1" }), { host: "proxy.corp", port: 8080 });
  assert.deepEqual(httpsProxyFor("api.openai.com", 443, { HTTPS_PROXY: "http://proxy.corp" }), { host: "proxy.corp", port: 80 });
  assert.equal(httpsProxyFor("api.openai.com", 443, { HTTPS_PROXY: "" }), null);
  assert.deepEqual(httpsProxyFor("api.openai.com", 443, { https_proxy: " ", HTTPS_PROXY: "http://proxy.corp:3128" }), { host: "proxy.corp", port: 3128 }, "a blank variable counts as unset");
  assert.equal(httpsProxyFor("internal.example", 443, { HTTPS_PROXY: "http://proxy.corp:3128", no_proxy: "", NO_PROXY: "internal.example" }), null);
  assert.equal(httpsProxyFor("api.openai.com", 443, {}), null);
  assert.throws(() => httpsProxyFor("api.openai.com", 443, { HTTPS_PROXY: "socks5://proxy.corp:1080" }), (e: Error & { code?: string }) => e.code === "PROXY_SCHEME_UNSUPPORTED");
});

/** The proxy variables of a child, whatever the machine's own are (both spellings; no exclusions). */
const proxyEnv = (url: string): Record<string, string> => ({ https_proxy: url, HTTPS_PROXY: url, no_proxy: "", NO_PROXY: "" });

test("a hostile proxy's answer to CONNECT is refused with a code naming it, and its socket closed", { timeout: 30_000 }, async () => {
  const answers: Array<[string, string]> = [
    ["not http at all\r\n\r\n", "PROXY_BAD_RESPONSE"],
    ["HTTP/1.1 200 OK\r\n\r\nbytes before the handshake", "PROXY_BAD_RESPONSE"],
    ["HTTP/1.1 502 Bad Gateway\r\n\r\n", "PROXY_HTTP_502"],
    [`HTTP/1.1 200 OK\r\nX-Pad: ${"x".repeat(17 * 1024)}`, "PROXY_BAD_RESPONSE"],
    ["", "PROXY_CLOSED"],
  ];
  for (const [answer, code] of answers) {
    let closed!: Promise<void>;
    const server = createServer((s) => {
      closed = new Promise((r) => s.on("close", () => r()));
      s.once("data", () => (answer === "" ? s.end() : s.write(answer)));
      s.on("error", () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const err = await new Promise<Error & { code?: string }>((resolve, reject) =>
      connectTunnel({ host: "127.0.0.1", port: (server.address() as AddressInfo).port }, "api.example.test", 443, (e) => (e === null ? reject(new Error("accepted")) : resolve(e))),
    );
    assert.equal(err.code, code, JSON.stringify(answer.slice(0, 40)));
    await closed;
    await new Promise<void>((r) => server.close(() => r()));
  }
});

/** A loopback CONNECT proxy: `docs.fetch.test:<port>` goes to 127.0.0.1:<port>; `requireAuth` answers 407 without it. */
const connectProxy = (requireAuth: string | null): Promise<LoopbackProxy> => loopbackProxy({ auth: requireAuth, tunnel: /^CONNECT docs\.fetch\.test:(\d+) HTTP\/1\.1$/ });

/** The TLS provider (a certificate for docs.fetch.test) and a state root selecting it, trusting the test CA. */
async function tlsProviderHome(): Promise<{ port: number; requests: number[]; env: Record<string, string>; close(): Promise<void> }> {
  const requests: number[] = [];
  const server = createHttpsServer({ cert: TEST_LEAF_CERT_PEM, key: TEST_LEAF_KEY_PEM }, (req, res) => {
    requests.push(1);
    req.resume().on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse("hello through the proxy"));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const dir = mkdtempSync(join(tmpdir(), "proxy-home-"));
  const provider = { api: "openai-chat", base_url: `https://docs.fetch.test:${port}/v1`, auth: "none", models: [{ id: "m" }] };
  writeFileSync(join(dir, "settings.json"), JSON.stringify({ providers: { remote: provider }, provider: "remote", model: "m" }));
  writeFileSync(join(dir, "ca.pem"), TEST_CA_PEM);
  return {
    port,
    requests,
    env: { MC_HOME: dir, NODE_EXTRA_CA_CERTS: join(dir, "ca.pem") },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

test("an https: provider is reached through HTTPS_PROXY's CONNECT tunnel, the proxy's credentials sent and never shown", { timeout: 60_000 }, async () => {
  const auth = `Basic ${Buffer.from("berth:pr0xy-p@ss").toString("base64")}`;
  const proxy = await connectProxy(auth);
  const provider = await tlsProviderHome();
  const url = `http://berth:pr0xy-p%40ss@127.0.0.1:${proxy.port}`;
  const { client: c, exited } = spawnStdio({ ...provider.env, ...proxyEnv(url) });
  try {
    const started = await c.open();
    const { terminal, frames } = await c.turn(started.session_id as string, "hi");
    assert.equal(terminal.type, "turn.completed", JSON.stringify(terminal));
    assert.equal(frames.filter((f) => f.type === "assistant.delta").map((f) => f.content).join(""), "hello through the proxy");
    assert.equal(proxy.heads.length, 1, "one tunnel");
    assert.match(proxy.heads[0]!, new RegExp(`^CONNECT docs\\.fetch\\.test:${provider.port} HTTP/1\\.1\\r\\nHost: docs\\.fetch\\.test:${provider.port}\\r\\n`));
    assert.equal(provider.requests.length, 1);
    c.end();
    await exited;
    const seen = JSON.stringify(c.frames) + c.stderr();
    for (const secret of ["pr0xy-p@ss", "pr0xy-p%40ss", auth.slice(6)]) assert.ok(!seen.includes(secret), `the proxy's credential is not shown (${secret})`);
  } finally {
    c.end();
    await exited;
    await proxy.close();
    await provider.close();
  }
});

/** One turn through a fresh `berth stdio` with `env`: its terminal's message. */
async function failedTurn(env: Record<string, string>): Promise<unknown> {
  const { client, exited } = spawnStdio(env);
  try {
    const started = await client.open();
    return (await client.turn(started.session_id as string, "hi")).terminal.message;
  } finally {
    client.end();
    await exited;
  }
}

test("a proxy that refuses the tunnel, an unsupported proxy URL or an absent proxy fails the turn naming it; the session goes on", { timeout: 60_000 }, async () => {
  const proxy = await connectProxy(`Basic ${Buffer.from("someone:else").toString("base64")}`);
  const provider = await tlsProviderHome();
  const refused = spawnStdio({ ...provider.env, ...proxyEnv(`http://127.0.0.1:${proxy.port}`) });
  try {
    const started = await refused.client.open();
    const { terminal } = await refused.client.turn(started.session_id as string, "hi");
    assert.equal(terminal.type, "turn.failed", JSON.stringify(terminal));
    assert.equal(terminal.message, "the provider request failed: provider connection through HTTPS_PROXY failed (PROXY_HTTP_407; 3 attempts)");
    assert.equal(provider.requests.length, 0);
    const again = await refused.client.turn(started.session_id as string, "again");
    assert.equal(again.terminal.type, "turn.failed");
  } finally {
    refused.client.end();
    await refused.exited;
  }
  const gone = createServer();
  await new Promise<void>((r) => gone.listen(0, "127.0.0.1", r));
  const closedPort = (gone.address() as AddressInfo).port;
  await new Promise<void>((r) => gone.close(() => r()));
  try {
    assert.equal(await failedTurn({ ...provider.env, ...proxyEnv("socks5://127.0.0.1:1") }), "the provider request failed: provider connection through HTTPS_PROXY failed (PROXY_SCHEME_UNSUPPORTED)");
    // A proxy that is not there is named as the proxy, not taken for the provider.
    assert.equal(
      await failedTurn({ ...provider.env, ...proxyEnv(`http://127.0.0.1:${closedPort}`) }),
      "the provider request failed: provider connection through HTTPS_PROXY failed (PROXY_ECONNREFUSED; 3 attempts)",
    );
  } finally {
    await proxy.close();
    await provider.close();
  }
});

test("a proxy that never answers CONNECT holds nothing once the turn is cancelled: its connection is closed", { timeout: 60_000 }, async () => {
  let connected!: () => void;
  const sawConnect = new Promise<void>((r) => (connected = r));
  const closes: Array<Promise<void>> = [];
  const silent = createServer((s) => {
    closes.push(new Promise((r) => s.on("close", () => r())));
    s.on("data", (d) => {
      if (d.toString("latin1").startsWith("CONNECT ")) connected();
    });
    s.on("error", () => undefined);
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const provider = await tlsProviderHome();
  const { client: c, exited } = spawnStdio({ ...provider.env, ...proxyEnv(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`) });
  try {
    const started = await c.open();
    const sid = started.session_id as string;
    const from = c.frames.length;
    const turn = c.request({ type: "turn.start", session_id: sid, prompt: "hi" });
    const started2 = await c.waitFor((m) => m.type === "turn.started" && m.request_id === turn, from);
    await sawConnect;
    c.request({ type: "turn.cancel", session_id: sid, turn_id: started2.turn_id });
    await c.waitFor((m) => m.type === "turn.cancelled", from, "turn.cancelled");
    assert.equal(closes.length, 1, "one connection to the proxy");
    await closes[0]; // never settles while the tunnel is still held
    assert.equal(provider.requests.length, 0);
  } finally {
    c.end();
    await exited;
    silent.close();
    await provider.close();
  }
});
