/**
 * Berth's runtime backend in process: chats (initial turn without a duplicate echo, disposal), refused
 * configuration, a declined and a withdrawn question, and bounded tool output in `tool_completed`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AhpClient, FakeBackend, berthHomeFor, withHost, type Json } from "./helpers.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import { ended, newSession, startTurn, user, waitIdle, withBerth } from "./berth-rig.js";
import { boundOutput, TOOL_OUTPUT_MAX_BYTES } from "../../src/backends/berth/projection.js";

test("chats: an initial message runs once, disposal forgets the chat; bad configuration is refused", () =>
  withBerth(async ({ h, cwd }) => {
    const { c } = await AhpClient.init(h, []);
    const { session, chat } = await newSession(c, "ahp-session:/chats", cwd);
    const two = "ahp-chat:/two";
    const r = await c.request("createChat", { channel: session, chat: two, title: "Two", initialMessage: user("hi two") });
    assert.equal(r.result, null, JSON.stringify(r.error));
    await c.request("subscribe", { channel: two });
    const done = await c.action((e) => e.channel === two && ["chat/turnComplete", "chat/error"].includes(e.action.type), "initial turn", 10_000);
    assert.equal(done.action.type, "chat/turnComplete");
    const turns = h.state.chatIndex.get(two)!.turns;
    assert.equal(turns.length, 1, "one turn: the host's, not a second echo");
    assert.equal((turns[0]!.responseParts as Json[]).find((p) => p.kind === "markdown")!.content, "echo: hi two");
    const registry = () => JSON.parse(readFileSync(join(h.stateDir, "berth-runtime.json"), "utf8")) as { sessions: Json[] };
    assert.deepEqual(registry().sessions[0]!.chats.map((x: Json) => x.uri), [two]);

    // The primary chat's transcript is its own.
    startTurn(c, chat, "p1", "primary only");
    assert.equal((await ended(c, "p1")).action.type, "chat/turnComplete");
    assert.deepEqual(h.state.chatIndex.get(two)!.turns.length, 1);

    assert.equal((await c.request("disposeChat", { channel: two })).result, null);
    assert.equal(h.state.chatIndex.has(two), false);
    assert.deepEqual(registry().sessions[0]!.chats.map((x: Json) => [x.uri, x.disposed]), [[two, true]], "kept as disposed: never listed as a session");
    assert.deepEqual(await c.request("fetchTurns", { channel: chat }).then((x) => x.result), {}, "no older history");

    c.dispatch(session, { type: "session/configChanged", config: { thinkingLevel: "ultra" } });
    const bad = await c.action((e) => e.action.type === "session/configChanged" && e.rejectionReason !== undefined, "refused config");
    assert.match(bad.rejectionReason, /thinkingLevel must be one of default, low, medium, high, x_high, max/);
    assert.equal(registry().sessions[0]!.thinkingLevel, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("questions: a declined answer reaches the model; a question withdrawn by cancellation leaves the route working", () =>
  withBerth(async ({ h, fake, cwd }) => {
    const { c } = await AhpClient.init(h, []);
    const { session, chat } = await newSession(c, "ahp-session:/q", cwd);
    fake.script([{ steps: [{ toolCall: { id: "q1", name: "question", arguments: { question: "Name?" } } }] }, { steps: [{ text: "ok" }] }]);
    startTurn(c, chat, "d1", "ask");
    const asked = await c.action((e) => e.action.type === "chat/inputRequested", "question", 10_000);
    assert.equal(asked.action.request.questions[0].kind, "text");
    c.dispatch(chat, { type: "chat/inputCompleted", requestId: asked.action.request.id, response: "decline" });
    const resolved = await c.action((e) => e.action.type === "chat/inputCompleted" && e.origin?.clientId === "c1", "resolved", 10_000);
    assert.equal(resolved.action.response, "decline");
    assert.equal((await ended(c, "d1")).action.type, "chat/turnComplete");
    assert.match(JSON.stringify(fake.requests.at(-1)!.json), /The user declined to answer/);

    fake.script([{ steps: [{ toolCall: { id: "q2", name: "question", arguments: { question: "Pick", options: ["a", "b"] } } }] }]);
    startTurn(c, chat, "d2", "ask again");
    await c.action((e) => e.action.type === "chat/inputRequested" && e.action.request.id !== asked.action.request.id, "second question", 10_000);
    c.dispatch(chat, { type: "chat/turnCancelled", turnId: "d2", duration: 0 });
    assert.equal((await ended(c, "d2")).action.type, "chat/turnCancelled");
    const s = h.state.sessions.get(session)!;
    assert.equal(s.inputNeeded.size, 0, "the settled turn retired its request");
    fake.script([{ steps: [{ text: "still here" }] }]);
    const route = s.route;
    await waitIdle(h, session);
    startTurn(c, chat, "d3", "next");
    assert.equal((await ended(c, "d3")).action.type, "chat/turnComplete");
    assert.equal(s.route, route, "no event was refused (the route was never replaced)");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("tool_completed carries the tool's output, bounded at TOOL_OUTPUT_MAX_BYTES", () =>
  withBerth(async ({ h, fake, cwd }) => {
    assert.equal(boundOutput("é".repeat(TOOL_OUTPUT_MAX_BYTES / 2)), "é".repeat(TOOL_OUTPUT_MAX_BYTES / 2), "at the bound: kept whole");
    const over = boundOutput("a".repeat(TOOL_OUTPUT_MAX_BYTES + 1));
    assert.equal(over, `${"a".repeat(TOOL_OUTPUT_MAX_BYTES)}\n[… 1 more bytes not shown]`);
    writeFileSync(join(cwd, "big.txt"), "line of text\n".repeat(4000));
    const { c } = await AhpClient.init(h, []);
    const { chat } = await newSession(c, "ahp-session:/out", cwd);
    fake.script([{ steps: [{ toolCall: { id: "r1", name: "read", arguments: { path: "big.txt" } } }] }, { steps: [{ text: "read it" }] }]);
    startTurn(c, chat, "o1", "read the file");
    const done = await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.turnId === "o1", "tool complete", 10_000);
    const text: string = done.action.result.content[0].text;
    assert.ok(text.startsWith(readFileSync(join(cwd, "big.txt"), "utf8").slice(0, 12)) || text.includes("line of text"));
    assert.match(text, /more bytes not shown\]$/);
    assert.ok(Buffer.byteLength(text) <= TOOL_OUTPUT_MAX_BYTES + 64);
    assert.equal((await ended(c, "o1")).action.type, "chat/turnComplete");
    c.close();
  }));

test("a steering message whose turn ended first runs as its own turn and leaves the chat's steering slot", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "late-steer" });
    const { c } = await AhpClient.init(h, [reg.chat]);
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "first", turnId: "T1" } });
    await c.action((e) => e.action.type === "chat/turnStarted");
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("focus") });
    const st = await be.next((f) => f.type === "command" && f.command.type === "steer");
    be.send({ type: "command_result", commandId: st.commandId, accepted: true });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.action.kind === "steering");
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "focus", turnId: "T2", pendingId: "s1" } });
    await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.action.kind === "steering" && e.action.id === "s1");
    await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "T2");
    assert.equal(h.state.chatIndex.get(reg.chat)!.steeringMessage, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("a disposed session is not listed again after a restart (its Berth session file is kept)", async () => {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  const hostHome = mkdtempSync(join(tmpdir(), "bh-host-"));
  try {
    await withBerth(
      async ({ h, cwd }) => {
        const { c } = await AhpClient.init(h, []);
        const { chat } = await newSession(c, "ahp-session:/gone", cwd);
        startTurn(c, chat, "g1", "forget this one");
        assert.equal((await ended(c, "g1")).action.type, "chat/turnComplete");
        assert.equal((await c.request("disposeSession", { channel: "ahp-session:/gone" })).result, null);
        c.close();
      },
      { home: hostHome, berthHome, fake },
    );
    // Another door's session, written meanwhile: it is listed (the control for the disposed one).
    const other = await new SessionStore({ home: berthHome }).create(tmpdir());
    await other.writer.append({ kind: "user", turn_id: "x1", text: "from another door" });
    await other.release();
    await withBerth(
      async ({ h, rt }) => {
        await rt.discovered();
        const { c } = await AhpClient.init(h, []);
        for (let i = 0; ![...h.state.sessions.values()].some((s) => s.title === "from another door"); i++) {
          assert.ok(i < 2000, "the other door's session is registered");
          await new Promise((r) => setTimeout(r, 5));
        }
        const titles = ((await c.request("listSessions", {})).result.items as Json[]).map((x) => x.title);
        assert.ok(titles.includes("from another door") && !titles.includes("forget this one"), JSON.stringify(titles));
        c.close();
      },
      { home: hostHome, berthHome, fake },
    );
    assert.equal((await new SessionStore({ home: berthHome }).list(null, 10)).entries.length, 2, "the Berth session files are kept");
  } finally {
    await fake.close();
  }
});
