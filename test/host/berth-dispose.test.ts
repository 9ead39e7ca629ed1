/**
 * `dispose_session` on Berth's own backend, end to end (the real host, the backend, the loopback fake provider):
 *  - a disposal whose registry write fails is refused naming the cause and the fix, and the session stays served
 *    exactly as before (a client still runs a turn on it, and a retry once the registry is writable succeeds);
 *  - a disposal stops the session's running turn before it is accepted: a tool still running (one that ignores
 *    SIGTERM, so it outlives the cancellation by the bash tool's kill grace) has ended, and the provider gets no
 *    further request; the wait is bounded (`disposeWaitMs`), after which the disposal is answered anyway;
 *  - a session whose creation's claim the host has not answered yet can be disposed: the claim's late grant is
 *    retired, and the session is gone on both sides.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, until, type Json } from "./helpers.js";
import { alive, ended, newSession, runStubbornTool, startTurn, withBerth } from "./berth-rig.js";

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

test("a disposal stops the session's running turn before it is accepted; the provider gets no further request", () =>
  withBerth(async ({ h, rt, fake, cwd }) => {
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const uri = "ahp-session:/dispose-running";
    const { chat } = await newSession(c, uri, cwd);
    const pid = await runStubbornTool(c, fake, chat, cwd);
    const requests = fake.requests.length;

    const r = await c.request("disposeSession", { channel: uri });
    assert.equal(r.result, null, JSON.stringify(r.error));
    assert.equal(alive(pid), false, "the turn's tool has ended by the time the disposal is accepted");
    assert.equal(fake.requests.length, requests, "no provider request after the tool");
    await rt.sync();
    assert.equal(fake.unscript(), 1, "the turn after the tool never reached the provider");
    assert.equal(fake.requests.length, requests);
    assert.deepEqual(await listed(c), []);
    c.close();
  }));

test("a disposal waits for a stuck turn at most disposeWaitMs, then is accepted and says so; the turn still ends", () => {
  const logs: string[] = [];
  return withBerth(
    async ({ h, rt, fake, cwd }) => {
      const { c } = await AhpClient.init(h, ["ahp-root://"]);
      const uri = "ahp-session:/dispose-stuck";
      const { chat } = await newSession(c, uri, cwd);
      const pid = await runStubbornTool(c, fake, chat, cwd);
      const requests = fake.requests.length;

      // The bound (0.2 s) ends the wait long before the tool's SIGKILL (after the 2 s grace) ends the turn.
      const r = await c.request("disposeSession", { channel: uri });
      assert.equal(r.result, null, JSON.stringify(r.error));
      assert.ok(logs.some((m) => m.includes("did not stop within 0.2 s; the disposal is accepted")), logs.join("\n"));
      assert.deepEqual(await listed(c), []);
      await until(() => !alive(pid), 15_000, "the tool killed after its grace");
      await rt.sync();
      assert.equal(fake.unscript(), 1, "the turn after the tool never reached the provider");
      assert.equal(fake.requests.length, requests);
      c.close();
    },
    { disposeWaitMs: 200, log: (m) => logs.push(m) },
  );
});

test("a session whose creation's claim awaits the host's answer can be disposed; the late grant is retired", () =>
  withBerth(
    async ({ h, rt, tap, cwd }) => {
      const t = tap!;
      const { c } = await AhpClient.init(h, ["ahp-root://"]);
      const uri = "ahp-session:/dispose-creating";
      // The claim, and all the backend writes after it, waits in the tap: the host still holds the session creating.
      t.holdFrom("up", (f) => f.type === "register_session" && f.hello.requestedSession === uri);
      const created = await c.request("createSession", { channel: uri, provider: "berth", workingDirectories: [`file://${cwd}`] });
      assert.equal(created.result, null, JSON.stringify(created.error));
      await until(() => t.held("up").length > 0, 10_000, "the claim (held)");
      const claim = t.held("up")[0]!;
      assert.equal(h.state.sessions.get(uri)?.lifecycle, "creating");

      const disposed = c.request("disposeSession", { channel: uri });
      await until(() => t.held("up").some((f) => f.type === "command_result"), 10_000, "the disposal's answer (held)");
      const answer = t.held("up").find((f) => f.type === "command_result")!;
      assert.deepEqual([answer.accepted, answer.error], [true, undefined], "the backend disposes a session still being created");
      t.release("up"); // the host grants the claim, then reads the acceptance and removes the session
      assert.equal((await disposed).result, null, JSON.stringify((await disposed).error));
      await rt.sync();
      await rt.sync();

      const grant = t.frames("down").find((f) => f.type === "session_registered" && f.requestId === claim.requestId);
      assert.ok(grant, "the host granted the claim it read first");
      const unregs = t.frames("up").filter((f) => f.type === "unregister_session");
      assert.deepEqual(unregs.map((f) => [f.session, f.backendConnectionId]), [[uri, grant.backendConnectionId]], "the grant is retired");
      assert.equal(rt.inspect(uri), undefined, "not served");
      assert.deepEqual([...h.state.sessions.keys()], [], "the host holds no session");
      assert.deepEqual(await listed(c), []);
      const entries = registryEntries(h.stateDir);
      assert.deepEqual(entries.map((e) => [e.disposed, e.creationToken, e.requestedSession]), [[true, undefined, undefined]], "marked disposed; the token is gone");
      assert.deepEqual(c.invalid, []);
      c.close();
    },
    { tap: true },
  ));
