/**
 * After a turn, the provider it used opens its next connection (provider-cache.ts `warmAfterTurn`): against a server
 * that closes every connection after its answer, the next turn's request then goes over a connection opened before
 * that turn started, not one it had to open itself. What the server observes: a connection with no request arrives
 * after turn 1 ended, and turn 2's request comes over it. Against a server that keeps connections alive, the pooled
 * connection is reused as before.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "../../src/runtime/agent.js";
import { idleConnections } from "../../src/runtime/providers/node-fetch.js";
import { chatSse } from "../helpers/chat-sse.js";
import { bareTurns } from "../helpers/bare-turn.js";

async function serve(close: boolean) {
  const connections: number[] = [];
  const requests: number[] = [];
  const waiters: Array<() => void> = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests.push(req.socket.remotePort!);
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream", ...(close ? { connection: "close" } : {}) });
      res.end(chatSse("ok"));
    });
  });
  server.on("connection", (s: Socket) => {
    connections.push(s.remotePort!);
    for (const w of waiters.splice(0)) w();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    connections,
    requests,
    async waitForConnections(n: number): Promise<void> {
      while (connections.length < n) await new Promise<void>((r) => waiters.push(r));
    },
    close: (): Promise<void> => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function rig(close: boolean) {
  const srv = await serve(close);
  const home = mkdtempSync(join(tmpdir(), "pw-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "pw-cwd-"));
  writeFileSync(
    join(home, "settings.json"),
    JSON.stringify({ provider: "fake", model: "m", providers: { fake: { api: "openai-chat", base_url: srv.url, auth: "none", models: [{ id: "m" }] } } }),
  );
  const agent = new Agent({ home, cwd, env: { PATH: process.env["PATH"], MC_HOME: home } });
  const turn = bareTurns(agent, cwd);
  return {
    srv,
    turn,
    close: async () => {
      await agent.close();
      await srv.close();
      rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

test("a server closing each connection: the next turn's request comes over a connection opened after the last turn", { timeout: 60_000 }, async () => {
  const r = await rig(true);
  try {
    await r.turn("t1");
    assert.equal(r.srv.requests.length, 1);
    const seen = r.srv.connections.length;
    // Opened after turn 1 ended, with no request on it yet.
    await r.srv.waitForConnections(seen + 1);
    assert.equal(r.srv.requests.length, 1);
    const spare = r.srv.connections[seen];
    await r.turn("t2");
    assert.equal(r.srv.requests.length, 2);
    assert.equal(r.srv.requests[1], spare, "turn 2's request came over the connection opened after turn 1");
  } finally {
    await r.close();
  }
});

test("a server keeping connections alive: the next turn reuses the pooled connection", { timeout: 60_000 }, async () => {
  const r = await rig(false);
  try {
    // A turn ends at the answer's last event; its connection goes back to the pool once the response's own end has
    // been read, a few event-loop turns later. A turn started after that takes the pooled connection.
    const pooled = async (): Promise<void> => {
      while (idleConnections(r.srv.url) < 1) await new Promise((res) => setImmediate(res));
    };
    await r.turn("t1");
    await pooled();
    await r.turn("t2");
    await pooled();
    await r.turn("t3");
    assert.equal(r.srv.requests.length, 3);
    assert.equal(r.srv.requests[1], r.srv.requests[0]);
    assert.equal(r.srv.requests[2], r.srv.requests[0]);
    assert.equal(r.srv.connections.length, 1, "no connection opened ahead while the kept-alive one was in use");
  } finally {
    await r.close();
  }
});
