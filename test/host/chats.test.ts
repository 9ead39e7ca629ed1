import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, until, withHost, type Json } from "./helpers.js";
import { actionKnownTo } from "../../src/protocols/host/ahp-version.js";

const caps = { create: true, dispose: true, fork: true, sideChat: true };
const user = (text: string) => ({ text, origin: { kind: "user" } });

test("createChat/disposeChat: routed to v3 create_chat/dispose_chat, added only on acceptance, ordered before chat events", () => {
  const home = tempHome();
  return withHost(
    async (h) => {
      const history = [{ id: "h1", userText: "q", responseText: "a" }];
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "multi", chatCapabilities: caps, history });
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.session]);
      const chatUri = "ahp-chat:/side-1";
      const pending = c.request("createChat", { channel: reg.session, chat: chatUri, title: "Side", initialMessage: user("hi there") });
      const cmd = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
      assert.equal(cmd.chat, undefined, "the new chat is named in the command, not as the envelope target");
      assert.equal(cmd.command.chat, chatUri);
      assert.equal(cmd.command.initialText, "hi there");
      const initialTurnId: string = cmd.command.initialTurnId;
      assert.equal(typeof initialTurnId, "string");
      assert.equal(h.state.chatIndex.has(chatUri), false, "not added before the runtime accepts");
      // The runtime accepts and streams the initial turn in the same write: the chat and its turn
      // must already be reduced when the chat events are handled.
      be.raw(
        [
          { type: "command_result", commandId: cmd.commandId, accepted: true },
          { type: "chat_event", session: reg.session, chat: chatUri, event: { type: "text_delta", text: "hello" } },
          { type: "chat_event", session: reg.session, chat: chatUri, event: { type: "settled", cancelled: false } },
        ]
          .map((f) => JSON.stringify(f) + "\n")
          .join(""),
      );
      assert.equal((await pending).result, null);
      const added = await c.action((e) => e.channel === reg.session && e.action.type === "session/chatAdded");
      assert.equal(added.action.summary.resource, chatUri);
      await c.note("root/sessionSummaryChanged", (p) => Array.isArray(p.changes.chats) && p.changes.chats.length === 2);
      const sub = await c.request("subscribe", { channel: chatUri });
      const turn = sub.result.snapshot.state.turns[0];
      assert.equal(turn.id, initialTurnId);
      assert.equal(turn.message.text, "hi there");
      assert.equal(turn.responseParts[0].content, "hello");
      assert.equal(be.frames.some((f) => f.type === "error"), false, "no chat event was refused");

      // Validation happens before anything is sent.
      assert.equal((await c.request("createChat", { channel: reg.session, chat: chatUri })).error.code, -32010);
      assert.equal((await c.request("createChat", { channel: "ahp-session:/nope", chat: "ahp-chat:/x" })).error.code, -32001);
      assert.equal((await c.request("createChat", { channel: reg.session, chat: "not-a-chat" })).error.code, -32602);
      const badSrc = await c.request("createChat", { channel: reg.session, chat: "ahp-chat:/f0", source: { kind: "fork", chat: reg.chat, turnId: "unknown" } });
      assert.equal(badSrc.error.code, -32602);

      // Fork: copies history through the source turn; origin names the source.
      const fork = c.request("createChat", { channel: reg.session, chat: "ahp-chat:/fork-1", source: { kind: "fork", chat: reg.chat, turnId: "h1" } });
      const fc = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
      assert.deepEqual(fc.command.source, { kind: "fork", chat: reg.chat, turnId: "h1" });
      be.send({ type: "command_result", commandId: fc.commandId, accepted: true });
      assert.equal((await fork).result, null);
      const forked = h.state.chatIndex.get("ahp-chat:/fork-1")!;
      assert.deepEqual(forked.turns.map((t) => t.id), ["h1"]);
      assert.deepEqual(forked.origin, { kind: "fork", chat: reg.chat, turnId: "h1" });

      // A refused creation adds nothing; an indeterminate one keeps the URI reserved.
      const refused = c.request("createChat", { channel: reg.session, chat: "ahp-chat:/r" });
      const rc = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
      be.send({ type: "command_result", commandId: rc.commandId, accepted: false, error: "no" });
      assert.equal((await refused).error.data.outcome, "rejected");
      assert.equal(h.state.chatIndex.has("ahp-chat:/r"), false);
      const unsure = c.request("createChat", { channel: reg.session, chat: "ahp-chat:/u" });
      const uc = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
      be.send({ type: "command_indeterminate", commandId: uc.commandId, error: "lost" });
      assert.equal((await unsure).error.data.outcome, "indeterminate");
      assert.equal((await c.request("createChat", { channel: reg.session, chat: "ahp-chat:/u" })).error.code, -32010);

      // disposeChat: the primary chat stays; a refusal keeps the chat; acceptance removes it.
      assert.equal((await c.request("disposeChat", { channel: reg.chat })).error.code, -32602);
      assert.equal((await c.request("disposeChat", { channel: "ahp-chat:/none" })).error.code, -32008);
      const d1 = c.request("disposeChat", { channel: "ahp-chat:/fork-1" });
      const dc1 = await be.next((f) => f.type === "command" && f.command.type === "dispose_chat");
      assert.equal(dc1.chat, "ahp-chat:/fork-1");
      be.send({ type: "command_result", commandId: dc1.commandId, accepted: false, error: "busy" });
      assert.equal((await d1).error.data.outcome, "rejected");
      assert.ok(h.state.chatIndex.has("ahp-chat:/fork-1"));
      const d2 = c.request("disposeChat", { channel: "ahp-chat:/fork-1" });
      const dc2 = await be.next((f) => f.type === "command" && f.command.type === "dispose_chat");
      be.send({ type: "command_result", commandId: dc2.commandId, accepted: true });
      assert.equal((await d2).result, null);
      await c.action((e) => e.action.type === "session/chatRemoved" && e.action.chat === "ahp-chat:/fork-1");
      assert.equal((await c.request("subscribe", { channel: "ahp-chat:/fork-1" })).error.code, -32008);
      assert.deepEqual(c.invalid, []);
      c.close();
      be.close();
    },
    { home },
  ).then(() =>
    // Created chats (with their origin) and removals survive a restart.
    withHost(
      async (h) => {
        const s = [...h.state.sessions.values()][0]!;
        assert.deepEqual([...s.chats.keys()].sort(), [s.primaryChat, "ahp-chat:/side-1"].sort());
        const { c, result } = await AhpClient.init(h, [s.uri]);
        assert.equal(result.snapshots[0].state.chats.length, 2);
        assert.deepEqual(c.invalid, []);
        c.close();
      },
      { home },
    ),
  );
});

test("createChat needs an advertised capability and a v3+ route", () =>
  withHost(async (h) => {
    const v2 = await FakeBackend.session(h, { protocolVersion: 2, sourceId: "old" });
    const only = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "createOnly", chatCapabilities: { create: true } });
    const { c } = await AhpClient.init(h, []);
    assert.equal((await c.request("createChat", { channel: v2.reg.session, chat: "ahp-chat:/a" })).error.code, -32600);
    const fork = await c.request("createChat", { channel: only.reg.session, chat: "ahp-chat:/b", source: { kind: "sideChat", chat: only.reg.chat, turnId: "t" } });
    assert.equal(fork.error.code, -32602);
    assert.equal(only.be.frames.filter((f) => f.type === "command").length, 0);
    c.close();
    v2.be.close();
    only.be.close();
  }));

test("pending messages: steering → steer, queued → follow_up, echoed on acceptance, consumed by the runtime's user_message", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "pm" });
    const { c } = await AhpClient.init(h, [reg.chat]);
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "first", turnId: "T1" } });
    await c.action((e) => e.action.type === "chat/turnStarted");
    const q1 = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("next one") });
    const fu = await be.next((f) => f.type === "command" && f.command.type === "follow_up");
    assert.deepEqual(fu.command, { type: "follow_up", text: "next one", id: "q1" });
    be.send({ type: "command_result", commandId: fu.commandId, accepted: true });
    const echo = await c.action((e) => e.action.type === "chat/pendingMessageSet");
    assert.deepEqual(echo.origin, { clientId: "c1", clientSeq: q1 });
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q2", message: user("and another") });
    const fu2 = await be.next((f) => f.type === "command" && f.command.type === "follow_up");
    be.send({ type: "command_result", commandId: fu2.commandId, accepted: true });
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("focus") });
    const st = await be.next((f) => f.type === "command" && f.command.type === "steer");
    assert.deepEqual(st.command, { type: "steer", text: "focus", id: "s1" });
    be.send({ type: "command_result", commandId: st.commandId, accepted: true });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.action.kind === "steering");
    const chat = h.state.chatIndex.get(reg.chat)!;
    assert.deepEqual(chat.queuedMessages.map((m) => m.id), ["q1", "q2"]);
    // The runtime injects the steering message into the running turn.
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "focus", pendingId: "s1" } });
    await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.action.kind === "steering");
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    // It starts the queued ones in order: by pendingId, then by the FIFO head's identical text.
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "next one", turnId: "T2", pendingId: "q1" } });
    const t2 = await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "T2");
    assert.equal(t2.action.queuedMessageId, "q1");
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "and another", turnId: "T3" } });
    const t3 = await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "T3");
    assert.equal(t3.action.queuedMessageId, "q2");
    assert.deepEqual(chat.queuedMessages, []);
    assert.equal(chat.steeringMessage, undefined);
    // A refusal is echoed as a rejection; withdrawal is not in the backend protocol.
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q3", message: user("x") });
    const fu3 = await be.next((f) => f.type === "command" && f.command.type === "follow_up");
    be.send({ type: "command_result", commandId: fu3.commandId, accepted: false, error: "queue full" });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.rejectionReason === "backend refused: queue full");
    c.dispatch(reg.chat, { type: "chat/pendingMessageRemoved", kind: "queued", id: "q3" });
    await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.rejectionReason !== undefined);
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q4", message: { text: "x", origin: { kind: "agent" } } });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.action.id === "q4" && e.rejectionReason !== undefined);
    // An action for a channel that does not exist is silently ignored (no echo).
    const before = c.actions().length;
    c.dispatch("ahp-chat:/nowhere", { type: "chat/turnCancelled", turnId: "x", duration: 0 });
    assert.equal((await c.request("ping", {})).result, null);
    assert.equal(c.actions().length, before);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("session/configChanged → configure; echoed after acceptance; backend config_changed is published", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "cfg", model: { provider: "p", id: "m1" } });
    const { c, result } = await AhpClient.init(h, [reg.session]);
    assert.deepEqual(result.snapshots[0].state.config.values, { model: { provider: "p", id: "m1" } });
    c.dispatch(reg.session, { type: "session/configChanged", config: { model: { provider: "p", id: "m2" }, thinkingLevel: "high" } });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "configure");
    assert.deepEqual(cmd.command, { type: "configure", model: { provider: "p", id: "m2" }, thinkingLevel: "high" });
    assert.equal(cmd.chat, reg.chat);
    assert.equal((h.state.sessions.get(reg.session)!.extra.model as Json).id, "m1", "not reduced before acceptance");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const echo = await c.action((e) => e.action.type === "session/configChanged");
    assert.equal(echo.origin.clientId, "c1");
    assert.deepEqual((h.state.snapshot(reg.session)!.state as Json).config.values, { model: { provider: "p", id: "m2" }, thinkingLevel: "high" });
    // Only session-mutable keys; nothing is sent for an invalid change.
    c.dispatch(reg.session, { type: "session/configChanged", config: { temperature: 1 } });
    await c.action((e) => e.action.type === "session/configChanged" && e.rejectionReason !== undefined);
    c.dispatch(reg.session, { type: "session/configChanged", config: { thinkingLevel: "low" } });
    const cmd2 = await be.next((f) => f.type === "command" && f.command.type === "configure");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: false, error: "unknown level" });
    await c.action((e) => e.action.type === "session/configChanged" && e.rejectionReason === "backend refused: unknown level");
    assert.equal(h.state.sessions.get(reg.session)!.extra.thinkingLevel, "high");
    be.send({ type: "event", session: reg.session, event: { type: "config_changed", thinkingLevel: "medium" } });
    const pub = await c.action((e) => e.action.type === "session/configChanged" && e.origin === undefined && e.rejectionReason === undefined);
    assert.deepEqual(pub.action.config, { thinkingLevel: "medium" });
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("actions are filtered by the upstream introduced-in table: 0.9.x clients get 0.5.1 actions", () =>
  withHost(async (h) => {
    assert.equal(actionKnownTo("chat/turnsLoaded", "0.9.0"), true);
    assert.equal(actionKnownTo("session/inputNeededSet", "0.9.3"), true);
    assert.equal(actionKnownTo("chat/canvasesChanged", "0.9.7"), false);
    assert.equal(actionKnownTo("chat/canvasesChanged", "1.0.0"), true);
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "old-client", chatCapabilities: { pagedHistory: true }, historyNextCursor: "cur", history: [{ id: "b", userText: "u" }] });
    const c = await AhpClient.open(h);
    const init = await c.request("initialize", { protocolVersions: ["0.9.2"], clientId: "old", initialSubscriptions: [reg.chat] });
    assert.equal(init.result.protocolVersion, "0.9.2");
    const ft = c.request("fetchTurns", { channel: reg.chat, cursor: "cur" });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "fetch_turns");
    be.send({ type: "event", session: reg.session, event: { type: "turns_loaded", turns: [{ id: "a", userText: "older" }] } });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await ft).result, {});
    await until(() => c.actions(reg.chat).some((e) => e.action.type === "chat/turnsLoaded"), 3000, "turnsLoaded for a 0.9 client");
    c.close();
    be.close();
  }));

test("a client-cancelled turn: the runtime's trailing events are accepted until its settled, then the chat is strict again", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "drain" });
    const { c } = await AhpClient.init(h, [reg.chat]);
    const seq = (n: number, event: Json) => be.send({ type: "sequenced_event", session: reg.session, sequence: n, event });
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "T", startedAt: new Date().toISOString(), message: user("go") });
    const p = await be.next((f) => f.type === "command" && f.command.type === "prompt");
    be.send({ type: "command_result", commandId: p.commandId, accepted: true });
    seq(1, { type: "text_delta", text: "partial" });
    await c.action((e) => e.action.type === "chat/responsePart");
    c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "T", duration: 0 });
    const abort = await be.next((f) => f.type === "command" && f.command.type === "abort");
    // Output the runtime produced before it saw the abort, then its own settlement.
    seq(2, { type: "text_delta", text: " more" });
    seq(3, { type: "usage", outputTokens: 3 });
    seq(4, { type: "settled", cancelled: true });
    be.send({ type: "command_result", commandId: abort.commandId, accepted: true });
    for (const n of [2, 3, 4]) assert.equal((await be.next((f) => f.type === "event_ack" && f.sequence === n)).type, "event_ack");
    const turn = h.state.chatIndex.get(reg.chat)!.turns.find((t) => t.id === "T")!;
    assert.equal(turn.state, "cancelled");
    // Settled: a delta without a turn is a semantic error again.
    seq(5, { type: "text_delta", text: "stray" });
    assert.equal((await be.next((f) => f.type === "event_rejected" || f.type === "error")).type, "event_rejected");
    c.close();
    be.close();
  }));

test("a session's status is its chats' most pressing: a turn running, then failed, in a side chat reads so in the list", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "side-status", chatCapabilities: caps });
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const side = "ahp-chat:/side-status";
    const pending = c.request("createChat", { channel: reg.session, chat: side, title: "Side" });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await pending).result, null);
    // The activity value of each root/sessionSummaryChanged for this session (the flags masked off).
    const status = (want: number) => c.note("root/sessionSummaryChanged", (p) => p.session === reg.session && typeof p.changes.status === "number" && (p.changes.status & 31) === want);
    const side_ = (event: Json) => be.send({ type: "chat_event", session: reg.session, chat: side, event });

    // The primary chat is idle throughout: before, the session read Idle while its side chat ran and after it failed.
    const running = status(8);
    side_({ type: "agent_started", turnId: "s1" });
    await running;
    const failed = status(2);
    side_({ type: "settled", cancelled: false, error: "the side chat's provider failed" });
    await failed;
    const listed = await c.request("listSessions", {});
    assert.equal(listed.result.items.find((x: Json) => x.resource === reg.session).status & 31, 2, "the list says Error too");
    // A later turn in that chat that completes: Idle again.
    const idle = status(1);
    side_({ type: "agent_started", turnId: "s2" });
    side_({ type: "settled", cancelled: false });
    await idle;
    c.close();
    be.close();
  }));

test("fetchTurns while the chat's backend is away says so and to retry once it reconnects; a v2 backend cannot page", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "paged-away", chatCapabilities: { pagedHistory: true }, historyNextCursor: "cur", history: [{ id: "b", userText: "u" }] });
    const { c } = await AhpClient.init(h, [reg.chat]);
    be.close();
    await until(() => h.state.sessions.get(reg.session)?.route === undefined, 3000, "the route gone");
    const away = await c.request("fetchTurns", { channel: reg.chat, cursor: "cur" });
    assert.equal(away.error?.message, "the chat's backend is not connected, so nothing was sent: retry once it reconnects");
    const { be: v2, reg: reg2 } = await FakeBackend.session(h, { protocolVersion: 2, sourceId: "paged-away" });
    assert.equal(reg2.session, reg.session);
    const old = await c.request("fetchTurns", { channel: reg.chat, cursor: "cur" });
    assert.equal(old.error?.message, "the chat's backend speaks backend protocol v2, which cannot page history (fetch_turns needs v3 or later): update the backend");
    c.close();
    v2.close();
  }));
