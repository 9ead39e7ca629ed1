/**
 * An https: provider's connection, TLS handshake included, opens ahead of the first request too (node-fetch.ts
 * `preconnect`): `berth stdio` builds the provider while it starts a session, so the first turn's request is written
 * on a connection that is already secure. Driven end to end: a loopback TLS server (a certificate for 127.0.0.1
 * from a test CA the child trusts through NODE_EXTRA_CA_CERTS) sees the connection before any request, and the
 * request over it. A certificate the child does not trust only drops the spare: the turn reports the TLS error and
 * the process goes on.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { LOOPBACK_CA_PEM, LOOPBACK_LEAF_CERT_PEM, LOOPBACK_LEAF_KEY_PEM } from "../fixtures/tls.js";
import { chatSse } from "../helpers/chat-sse.js";
import { spawnStdio } from "../scv/client.js";

interface TlsProvider {
  port: number;
  /** Client ports of the TLS connections completed (handshake done), in order. */
  secure: number[];
  /** Client ports of the TCP connections accepted, in order. */
  accepted: number[];
  /** Client ports of the requests received, in order. */
  requests: number[];
  /** Whether each completed TLS connection resumed an earlier session, in order. */
  reused: boolean[];
  waitFor(what: () => boolean): Promise<void>;
  close(): Promise<void>;
}

/** `closeEach`: every answer closes its connection (`Connection: close`), so each turn needs a new one. */
async function tlsProvider(closeEach = false): Promise<TlsProvider> {
  const reused: boolean[] = [];
  const secure: number[] = [];
  const accepted: number[] = [];
  const requests: number[] = [];
  let waiters: Array<() => void> = [];
  const wake = (): void => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const server: Server = createServer({ cert: LOOPBACK_LEAF_CERT_PEM, key: LOOPBACK_LEAF_KEY_PEM }, (req, res) => {
    requests.push(req.socket.remotePort!);
    wake();
    req.resume().on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream", ...(closeEach ? { connection: "close" } : {}) });
      res.end(chatSse("hello over tls"));
    });
  });
  server.on("connection", (s: Socket) => {
    accepted.push(s.remotePort!);
    wake();
  });
  server.on("secureConnection", (s: TLSSocket) => {
    reused.push(s.isSessionReused());
    secure.push(s.remotePort!);
    wake();
  });
  server.on("tlsClientError", wake);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    secure,
    accepted,
    requests,
    reused,
    async waitFor(what) {
      while (!what()) await new Promise<void>((r) => waiters.push(r));
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A state root whose settings select the TLS provider; `trust` writes the test CA for NODE_EXTRA_CA_CERTS. */
function home(port: number, trust: boolean): { env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), "preconnect-https-"));
  const provider = { api: "openai-chat", base_url: `https://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "tls-model" }] };
  writeFileSync(join(dir, "settings.json"), JSON.stringify({ providers: { tls: provider }, provider: "tls", model: "tls-model" }));
  const env: Record<string, string> = { MC_HOME: dir };
  if (trust) {
    writeFileSync(join(dir, "ca.pem"), LOOPBACK_CA_PEM);
    env["NODE_EXTRA_CA_CERTS"] = join(dir, "ca.pem");
  }
  return { env };
}

test("an https: provider's connection is secure before the first turn, and that turn's request comes over it", { timeout: 60_000 }, async () => {
  const srv = await tlsProvider();
  const { client: c, exited } = spawnStdio(home(srv.port, true).env);
  try {
    const started = await c.open();
    // The handshake completed with no request made: the session's start opened it.
    await srv.waitFor(() => srv.secure.length === 1);
    assert.equal(srv.requests.length, 0);
    const { terminal, frames } = await c.turn(started.session_id as string, "hi");
    assert.equal(terminal.type, "turn.completed", JSON.stringify(terminal));
    assert.equal(frames.filter((f) => f.type === "assistant.delta").map((f) => f.content).join(""), "hello over tls");
    assert.deepEqual(srv.requests, [srv.secure[0]], "the first request came over the connection opened in advance");
    assert.deepEqual(srv.accepted, [srv.secure[0]], "no other connection was made");
  } finally {
    c.end();
    await exited;
    await srv.close();
  }
});

test("a spare whose certificate is not trusted is dropped: the turn reports the TLS error and the session goes on", { timeout: 60_000 }, async () => {
  const srv = await tlsProvider();
  const { client: c, exited } = spawnStdio(home(srv.port, false).env);
  try {
    const started = await c.open();
    const sid = started.session_id as string;
    // The spare's connection arrived and its handshake failed (the client refused the certificate).
    await srv.waitFor(() => srv.accepted.length >= 1);
    const first = await c.turn(sid, "hi");
    assert.equal(first.terminal.type, "turn.failed", JSON.stringify(first.terminal));
    assert.equal(first.terminal.code, "provider_error");
    // Named, with node's verify code and the fix, and not retried (a retry would be refused alike).
    assert.match(
      String(first.terminal.message),
      /^the provider request failed: provider TLS certificate not accepted \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\); if the provider's certificate comes from a private CA, set NODE_EXTRA_CA_CERTS to that CA's PEM file$/,
    );
    assert.equal(srv.requests.length, 0, "nothing was sent over an untrusted connection");
    // The process and the session are still usable; each turn made one connection attempt (its spare, then its
    // request: the certificate is refused once per connection, never retried).
    const accepted = srv.accepted.length;
    const again = await c.turn(sid, "again");
    assert.equal(again.terminal.type, "turn.failed");
    assert.equal(again.terminal.message, first.terminal.message);
    assert.equal(srv.requests.length, 0);
    assert.ok(srv.accepted.length - accepted <= 2, `at most a spare and one request connection per turn, got ${srv.accepted.length - accepted}`);
  } finally {
    c.end();
    await exited;
    await srv.close();
  }
});

test("a new connection to an https: provider resumes its TLS session", { timeout: 60_000 }, async () => {
  const srv = await tlsProvider(true);
  const { client: c, exited } = spawnStdio(home(srv.port, true).env);
  try {
    const sid = (await c.open()).session_id as string;
    for (const prompt of ["one", "two"]) assert.equal((await c.turn(sid, prompt)).terminal.type, "turn.completed");
    // The server closed each turn's connection: the second turn's (opened ahead after the first) was a new one.
    await srv.waitFor(() => srv.secure.length >= 2);
    assert.equal(srv.requests.length, 2);
    assert.notEqual(srv.requests[1], srv.requests[0]);
    assert.equal(srv.reused[0], false, "the first connection made a full handshake");
    assert.ok(srv.reused.slice(1).every(Boolean), `later connections resumed the session: ${JSON.stringify(srv.reused)}`);
  } finally {
    c.end();
    await exited;
    await srv.close();
  }
});
