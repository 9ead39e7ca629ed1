/**
 * `dispose_chat` on Berth's own backend, end to end (the real host, the backend, the loopback fake provider):
 *  - a disposal whose registry write fails is refused naming the cause and the fix, and the chat stays served
 *    exactly as before (a client still runs a turn on it, and a retry once the registry is writable succeeds);
 *  - a disposal waits for the chat's running turn at most `disposeWaitMs` (a tool that ignores SIGTERM outlives the
 *    cancellation by the bash tool's kill grace), is then accepted and logged, and what the chat's turn still emits
 *    after the acceptance never reaches the host (which would refuse it, for a chat it removed, and so end the
 *    session's registration).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, until, type Json } from "./helpers.js";
import { alive, ended, newSession, runStubbornTool, startTurn, withBerth } from "./berth-rig.js";

const registryOf = (stateDir: string): string => join(stateDir, "berth-runtime.json");
const chatsOf = (stateDir: string): Json[] => (JSON.parse(readFileSync(registryOf(stateDir), "utf8")) as { sessions: Json[] }).sessions[0]!.chats as Json[];

/** createChat `uri` (no initial message) on `session`, subscribed. */
async function newChat(c: AhpClient, session: string, uri: string): Promise<string> {
  const r = await c.request("createChat", { channel: session, chat: uri, title: "Two" });
  assert.equal(r.result, null, JSON.stringify(r.error));
  await c.request("subscribe", { channel: uri });
  return uri;
}

test("a chat disposal whose registry write fails is refused naming the cause and the fix; the chat stays served", () =>
  withBerth(async ({ h, rt, cwd }) => {
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const uri = "ahp-session:/dispose-chat-unwritable";
    const { session } = await newSession(c, uri, cwd);
    const two = await newChat(c, session, "ahp-chat:/kept");
    // A directory where the registry file must go: its atomic rename fails (EISDIR) whoever runs the test, root too.
    const registry = registryOf(h.stateDir);
    rmSync(registry);
    mkdirSync(join(registry, "in-the-way"), { recursive: true });

    const r = await c.request("disposeChat", { channel: two });
    assert.ok(r.error, "the disposal is refused");
    assert.equal(h.state.chatIndex.has(two), true, "the host keeps the chat");
    assert.equal(rt.inspect(uri)?.chats, 1, "the backend still serves it");

    startTurn(c, two, "k1", "still there?");
    assert.equal((await ended(c, "k1")).action.type, "chat/turnComplete", "a client still drives the chat");
    const text = c.actions(two).filter((e) => e.action.type === "chat/responsePart" && e.action.turnId === "k1");
    assert.ok(text.length > 0, "the turn's response reached the client");
    assert.match(r.error.message, /registry write failed \(EISDIR/, "names the cause");
    assert.match(r.error.message, /the chat is kept and still served/, "says what happened");
    assert.ok(r.error.message.includes(`make ${registry} a writable file`), `names the fix: ${r.error.message}`);
    assert.match(r.error.message, /then dispose the chat again/);

    rmSync(registry, { recursive: true });
    const again = await c.request("disposeChat", { channel: two });
    assert.equal(again.result, null, JSON.stringify(again.error));
    assert.equal(h.state.chatIndex.has(two), false, "disposed once the registry is writable");
    assert.equal(rt.inspect(uri)?.chats, 0);
    assert.deepEqual(chatsOf(h.stateDir).map((x) => [x.uri, x.disposed]), [[two, true]], "the registry marks it disposed");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("a chat disposal waits for a stuck turn at most disposeWaitMs, then is accepted and says so; late events are dropped", () => {
  const logs: string[] = [];
  return withBerth(
    async ({ h, rt, fake, cwd }) => {
      const { c } = await AhpClient.init(h, ["ahp-root://"]);
      const { session, chat } = await newSession(c, "ahp-session:/dispose-chat-stuck", cwd);
      const two = await newChat(c, session, "ahp-chat:/stuck");
      const pid = await runStubbornTool(c, fake, two, cwd);
      const requests = fake.requests.length;
      const route = h.state.sessions.get(session)!.route;

      // The bound (0.2 s) ends the wait long before the tool's SIGKILL (after the 2 s grace) ends the turn.
      const r = await c.request("disposeChat", { channel: two });
      assert.equal(r.result, null, JSON.stringify(r.error));
      assert.ok(logs.some((m) => m.includes("a disposed chat's turn did not stop within 0.2 s; the disposal is accepted")), logs.join("\n"));
      assert.equal(h.state.chatIndex.has(two), false, "the host removed the chat");

      // The turn ends after all (tool killed, turn settled): its last events must not reach the host.
      await until(() => !alive(pid), 15_000, "the tool killed after its grace");
      await until(() => logs.some((m) => m.includes("a disposed chat's runtime has closed")), 15_000, "the chat's runtime closed");
      await rt.sync();
      assert.equal(h.state.sessions.get(session)!.route, route, "no late event of the chat was refused (the registration was never replaced)");
      assert.equal(fake.unscript(), 1, "the turn after the tool never reached the provider");
      assert.equal(fake.requests.length, requests);

      startTurn(c, chat, "p1", "still here?");
      assert.equal((await ended(c, "p1")).action.type, "chat/turnComplete", "the session's primary chat still works");
      assert.deepEqual(c.invalid, []);
      c.close();
    },
    { disposeWaitMs: 200, log: (m) => logs.push(m) },
  );
});
