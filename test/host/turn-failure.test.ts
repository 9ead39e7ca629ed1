/**
 * A failed turn as an AHP client sees it (Berth's runtime, end to end): the error carries the same cause and fix as
 * `berth chat` prints (the provider's URL, never its user name, password or query), and the session list shows the
 * failure (status Error) rather than idle. A rate-limited or overloaded provider gets `berth chat`'s wait-and-retry
 * words.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AhpClient, type Json } from "./helpers.js";
import { ended, newSession, startTurn, withBerth } from "./berth-rig.js";
import { STATUS } from "../../src/protocols/host/model.js";

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

test("a refused provider connection reaches the AHP client with the URL to check (no credentials), and the session shows Error", async () => {
  const port = await closedPort();
  const berthHome = mkdtempSync(join(tmpdir(), "bh-berth-"));
  const baseUrl = `http://keyuser:pw-secret@127.0.0.1:${port}/v1?key=q-secret`;
  writeFileSync(join(berthHome, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: baseUrl, auth: "none", models: [{ id: "fake-model" }] } } }));
  await withBerth(
    async ({ h, cwd }) => {
      const { c } = await AhpClient.init(h, ["ahp-root://"]);
      const { session, chat } = await newSession(c, "ahp-session:/refused", cwd);
      startTurn(c, chat, "t1", "anyone there?");
      const end = await ended(c, "t1");
      assert.equal(end.action.type, "chat/error");
      const message: string = end.action.error.message;
      assert.match(message, /provider connection failed \(ECONNREFUSED; 3 attempts\)/);
      assert.ok(message.endsWith(`; is http://…@127.0.0.1:${port}/v1?… reachable?`), message);
      assert.doesNotMatch(JSON.stringify(end.action), /keyuser|pw-secret|q-secret/);

      // The failure stays visible where a user glances: the session list and the root notifications say Error.
      await c.note("root/sessionSummaryChanged", (p) => p.session === session && p.changes.status === STATUS.Error);
      const list = await c.request("listSessions", {});
      assert.equal(list.result.items.find((s: Json) => s.resource === session).status, STATUS.Error);
      c.close();
    },
    { berthHome },
  );
});

test("a rate-limited or overloaded provider reaches the AHP client with the same wait-and-retry hint as berth chat", () =>
  withBerth(async ({ h, cwd, fake }) => {
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const { chat } = await newSession(c, "ahp-session:/passing", cwd);
    // Retry-After 0: the runtime's three attempts take no wall-clock time.
    const limited = { status: 429, headers: { "retry-after": "0" } };
    fake.script([limited, limited, limited]);
    startTurn(c, chat, "t1", "hello?");
    const rate = await ended(c, "t1");
    assert.equal(rate.action.type, "chat/error");
    assert.match(rate.action.error.message, /provider rate limit \(HTTP 429 fake_error; 3 attempts\) \(provider_error\); the provider limits how often this key may ask: wait a minute, then send the prompt again$/);

    const busy = { status: 503, headers: { "retry-after": "0" } };
    fake.script([busy, busy, busy]);
    startTurn(c, chat, "t2", "and now?");
    const over = await ended(c, "t2");
    assert.equal(over.action.type, "chat/error");
    assert.match(over.action.error.message, /provider overloaded or unavailable \(HTTP 503 fake_error; 3 attempts\) \(provider_error\); the provider is failing or overloaded: send the prompt again in a minute$/);
    c.close();
  }));
