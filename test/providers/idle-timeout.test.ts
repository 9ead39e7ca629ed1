/**
 * A silent server is cut off (driver.ts, `idleTimeoutMs`; settings `stream_idle_timeout_ms`): before its response
 * head it is retried like a connection failure, after output the stream ends with the failure. Time the consumer
 * spends on a batch does not count. Each against the loopback fake provider, for every wire.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it, test } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { spawnStdio } from "../scv/client.js";
import { APIS, collect, makeProvider, request, terminal, textOf } from "./helpers.js";

for (const api of APIS) {
  describe(`${api}: a silent server`, () => {
    let fake: FakeProvider;
    beforeEach(async () => {
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("that never answers is cut off at the idle timeout, retried, then reported with the timeout", async () => {
      fake.script([{ waitForAbortBeforeHeaders: true }, { waitForAbortBeforeHeaders: true }, { waitForAbortBeforeHeaders: true }]);
      const { provider, delays } = makeProvider(api, fake, { idleTimeoutMs: 100 });
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "network", retryable: true, message: "provider sent nothing within its idle timeout (100 ms; 3 attempts)" }]);
      assert.equal(delays.length, 2);
      // The fake runs in this process: on a loaded machine an attempt's 100 ms can pass before the fake has read the
      // request (timers run before the poll phase that would have read it), so it may have seen fewer than three.
      assert.ok(fake.requests.length >= 1 && fake.requests.length <= 3, `${fake.requests.length} requests`);
      // Each attempt the server saw had its connection closed by the client (the server saw it go).
      await Promise.all(fake.requests.map((r) => r.socketClosed));
    });

    it("that answers on the second attempt is used", async () => {
      fake.script([{ waitForAbortBeforeHeaders: true }, { steps: [{ text: "late but fine" }] }]);
      const { provider } = makeProvider(api, fake, { idleTimeoutMs: 100 });
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "late but fine");
      assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
    });

    it("that stops mid-answer ends the stream after the text so far, not retried", async () => {
      fake.script([{ steps: [{ text: "partial answer" }, { waitForAbort: true }] }]);
      const { provider, delays } = makeProvider(api, fake, { idleTimeoutMs: 100 });
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "partial answer");
      assert.deepEqual(terminal(events), { type: "error", kind: "network", retryable: true, message: "provider sent nothing within its idle timeout (100 ms)" });
      assert.equal(fake.requests.length, 1);
      assert.equal(delays.length, 0);
    });

    it("is not a slow consumer: time spent on a batch does not count", async () => {
      fake.script([{ steps: [{ text: "one two", chunks: 2 }] }]);
      const { provider } = makeProvider(api, fake, { idleTimeoutMs: 100 });
      const events = [];
      for await (const ev of provider.stream(request())) {
        events.push(ev);
        // The consumer holds each event three timeouts long; the server sent everything at once.
        await new Promise((r) => setTimeout(r, 300));
      }
      assert.equal(textOf(events), "one two");
      assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
    });
  });
}

test("over SCV: a provider's stream_idle_timeout_ms fails a turn whose server stays silent, naming the timeout", { timeout: 60_000 }, async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "idle-timeout-"));
  const provider = { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }], stream_idle_timeout_ms: 1000 };
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { slow: provider }, provider: "slow", model: "fake-model" }));
  const { client: c, exited } = spawnStdio({ MC_HOME: home });
  try {
    const started = await c.open();
    fake.script([{ waitForAbortBeforeHeaders: true }, { waitForAbortBeforeHeaders: true }, { waitForAbortBeforeHeaders: true }]);
    const { terminal: t } = await c.turn(started.session_id as string, "hello");
    assert.equal(t.type, "turn.failed", JSON.stringify(t));
    assert.equal(t.code, "provider_error");
    assert.equal(t.message, "the provider request failed: provider sent nothing within its idle timeout (1 s; 3 attempts)");
    assert.equal(fake.requests.length, 3);
    // The session goes on: the next turn is answered.
    const next = await c.turn(started.session_id as string, "again");
    assert.equal(next.terminal.type, "turn.completed", JSON.stringify(next.terminal));
  } finally {
    c.end();
    await exited;
    await fake.close();
  }
});
