/**
 * `dispose_chat` on Berth's own backend, end to end (the real host, the backend, the loopback fake provider):
 *  - a disposal whose registry write fails is refused naming the cause and the fix, and the chat stays served
 *    exactly as before (a client still runs a turn on it, and a retry once the registry is writable succeeds);
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, type Json } from "./helpers.js";
import { ended, newSession, startTurn, withBerth } from "./berth-rig.js";

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
