/**
 * A provider that is hostile or broken after the answer is in: a bad usage object behind the tool calls, and a
 * server that keeps a stream alive with SSE comments but never sends an event. Each against the loopback fake.
 */
import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, it } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, terminal, textOf } from "./helpers.js";

for (const api of APIS) {
  describe(`${api}: hostile endings`, () => {
    let fake: FakeProvider;
    beforeEach(async () => {
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("a malformed usage after the tool calls fails the response without yielding any call", async () => {
      fake.script([{ steps: [{ toolCall: { name: "bash", arguments: { command: "rm -rf build" } } }], usage: { input: -1 } }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(terminal(events), { type: "error", kind: "protocol", retryable: false, message: "malformed provider stream" });
      assert.deepEqual(events.filter((e) => e.type === "tool_call"), [], "a call of a failed response was yielded");
    });
  });
}

/**
 * A server that answers every request with an event stream of SSE comments (a proxy's heartbeat over a dead
 * upstream), one every few milliseconds, after the SSE `lead` it is given; it ends the body after `max` comments
 * (so the old code, which took every chunk as progress, failed the test instead of hanging it).
 */
async function heartbeatServer(lead: string, max: number): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let n = 0;
  const open = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    n++;
    req.resume();
    open.add(res);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(lead);
    let sent = 0;
    const beat = setInterval(() => {
      if (sent++ >= max) {
        clearInterval(beat);
        res.end();
        return;
      }
      res.write(": keep-alive\n\n");
    }, 5);
    res.on("close", () => {
      clearInterval(beat);
      open.delete(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => n,
    close: async () => {
      for (const res of open) res.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe("anthropic: a tool_use block never closed", () => {
  it("fails the response instead of dropping the call and ending as if it were complete", async () => {
    const fake = await startFakeProvider();
    try {
      const ev = (type: string, o: Record<string, unknown>): { sse: string; event: string } => ({ sse: JSON.stringify({ type, ...o }), event: type });
      fake.script([
        {
          steps: [
            ev("content_block_start", { index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "bash", input: {} } }),
            ev("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: '{"command":"make"}' } }),
            // no content_block_stop for index 0
          ],
          stopReason: "tool_use",
        },
      ]);
      const { provider } = makeProvider("anthropic", fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(terminal(events), { type: "error", kind: "protocol", retryable: false, message: "malformed provider stream" });
    } finally {
      await fake.close();
    }
  });
});

describe("a stream kept alive by comments alone", () => {
  it("is cut off at the idle timeout, named for what it sent, retried while nothing was yielded", async () => {
    const s = await heartbeatServer("", 4000);
    try {
      const fake = { baseUrl: s.url } as FakeProvider;
      const { provider } = makeProvider("openai-chat", fake, { idleTimeoutMs: 1000 });
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "network", retryable: true, message: "provider sent only keep-alive comments within its idle timeout (1 s; 3 attempts)" }]);
      assert.equal(s.requests(), 3);
    } finally {
      await s.close();
    }
  });

  it("after output ends with the text so far and the same failure", async () => {
    const lead = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "partial" }, finish_reason: null }] })}\n\n`;
    const s = await heartbeatServer(lead, 4000);
    try {
      const { provider } = makeProvider("openai-chat", { baseUrl: s.url } as FakeProvider, { idleTimeoutMs: 1000 });
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "partial");
      assert.deepEqual(terminal(events), { type: "error", kind: "network", retryable: true, message: "provider sent only keep-alive comments within its idle timeout (1 s)" });
      assert.equal(s.requests(), 1);
    } finally {
      await s.close();
    }
  });
});
