/**
 * A failed turn as an AHP client sees it (Berth's runtime, end to end): the error carries the same cause and fix as
 * `berth chat` prints (the provider's URL, never its user name, password or query), and the session list shows the
 * failure (status Error) rather than idle.
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
