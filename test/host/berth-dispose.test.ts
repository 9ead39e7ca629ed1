/**
 * `dispose_session` on Berth's own backend, end to end (the real host, the backend, the loopback fake provider):
 *  - a disposal whose registry write fails is refused naming the cause and the fix, and the session stays served
 *    exactly as before (a client still runs a turn on it, and a retry once the registry is writable succeeds).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, type Json } from "./helpers.js";
import { ended, newSession, startTurn, withBerth } from "./berth-rig.js";

const registryOf = (stateDir: string): string => join(stateDir, "berth-runtime.json");
const registryEntries = (stateDir: string): Json[] => (JSON.parse(readFileSync(registryOf(stateDir), "utf8")) as { sessions: Json[] }).sessions;
const listed = async (c: AhpClient): Promise<string[]> => ((await c.request("listSessions", {})).result.items as Json[]).map((i) => i.resource as string);

test("a disposal whose registry write fails is refused naming the cause and the fix; the session stays served", () =>
  withBerth(async ({ h, rt, cwd }) => {
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const uri = "ahp-session:/dispose-unwritable";
    const { chat } = await newSession(c, uri, cwd);
    // A directory where the registry file must go: its atomic rename fails (EISDIR) whoever runs the test, root too.
    const registry = registryOf(h.stateDir);
    rmSync(registry);
    mkdirSync(join(registry, "in-the-way"), { recursive: true });

    const r = await c.request("disposeSession", { channel: uri });
    assert.ok(r.error, "the disposal is refused");
    assert.deepEqual(await listed(c), [uri], "the host keeps the session");
    assert.notEqual(rt.inspect(uri), undefined, "the backend still serves it");

    startTurn(c, chat, "t1", "still there?");
    assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete", "a client still drives the session");
    const text = c.actions(chat).filter((e) => e.action.type === "chat/responsePart" && e.action.turnId === "t1");
    assert.ok(text.length > 0, "the turn's response reached the client");
    assert.match(r.error.message, /registry write failed \(EISDIR/, "names the cause");
    assert.match(r.error.message, /the session is kept and still served/, "says what happened");
    assert.ok(r.error.message.includes(`make ${registry} a writable file`), `names the fix: ${r.error.message}`);

    rmSync(registry, { recursive: true });
    const again = await c.request("disposeSession", { channel: uri });
    assert.equal(again.result, null, JSON.stringify(again.error));
    assert.deepEqual(await listed(c), [], "disposed once the registry is writable");
    assert.equal(rt.inspect(uri), undefined);
    const entries = registryEntries(h.stateDir);
    assert.deepEqual(entries.map((e) => e.disposed), [true], "the registry marks it disposed");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));
