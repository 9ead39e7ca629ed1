/**
 * Active turns across a host restart (spec "Managed transcript continuity": "On a new backend incarnation or
 * restored disconnected host, an existing active ... turn is marked output-discontinuous"). A fake backend over the
 * real socket starts a turn, the host stops mid-turn and starts again on the same state directory, and an AHP client
 * over the real WebSocket sees the restored turn and how it ends.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { OBSERVATION_GAP_MESSAGE } from "../../src/protocols/host/managed-schema.js";
import { reduceChat, type Chat } from "../../src/client/ahp/reducer.js";

const user = (text: string) => ({ text, origin: { kind: "user" } });
const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });
const hello = (instanceId: string, extra: Json = {}) => ({ protocolVersion: 9, sourceId: "restore-src", instanceId, provider: "other", ...extra });

async function quiet(be: FakeBackend): Promise<void> {
  await be.roundTrip();
}

/**
 * Host 1 on `home`: `frame` registers a session, a client starts turn `turnId` with `prompt`, the backend accepts it
 * and `then` runs (what the backend streams before the host stops); the backend never settles the turn.
 */
async function turnInterrupted(home: string, frame: Json, turnId: string, prompt: string, then: (be: FakeBackend, reg: Json, c: AhpClient) => Promise<void>): Promise<Json> {
  let reg: Json = {};
  await withHost(
    async (h) => {
      const first = await FakeBackend.session(h, frame);
      reg = first.reg;
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
      c.dispatch(reg.chat, { type: "chat/turnStarted", turnId, message: user(prompt) });
      const cmd = await first.be.next((f) => f.type === "command" && f.command.type === "prompt");
      first.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
      await then(first.be, reg, c);
      c.close();
      first.be.close();
    },
    { home },
  );
  return reg;
}

/** Host 1: a turn that streamed text and started a tool, then the host stops (the backend never settles it). */
function turnInterruptedByRestart(home: string): Promise<Json> {
  return turnInterrupted(home, hello("inst-1"), "t1", "do it", async (be, reg, c) => {
    be.send(ev(reg, { type: "text_delta", text: "hello " }));
    be.send(ev(reg, { type: "tool_started", toolCallId: "tc1", toolName: "bash", input: "ls" }));
    await c.action((e) => e.action.type === "chat/toolCallReady");
    assert.deepEqual(c.invalid, []);
  });
}

/**
 * A turn interrupted by a restart (`turnInterruptedByRestart`), then a host on the same state directory with a client
 * subscribed to the chat (`result`: its initialize answer); `body` runs there. Resolves with the state directory and
 * the session's registration.
 */
async function onRestoredHost(body: (h: HostHandle, reg: Json, c: AhpClient, result: Json) => Promise<void>): Promise<{ home: string; reg: Json }> {
  const home = tempHome();
  const reg = await turnInterruptedByRestart(home);
  await withHost(
    async (h) => {
      const { c, result } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
      await body(h, reg, c, result);
    },
    { home },
  );
  return { home, reg };
}

function restoredTurnOf(snap: Json): Json {
  const t = snap.state.activeTurn as Json;
  assert.ok(t, "the running turn is restored as the chat's active turn");
  return t;
}

test("a turn running when the host stopped is restored with its received output; the same runtime's settlement reports the gap", async () => {
  await onRestoredHost(async (h, reg, c, result) => {
    const snap = (result.snapshots as Json[]).find((x) => x.resource === reg.chat)!;
    const t = restoredTurnOf(snap);
    assert.equal(t.id, "t1");
    assert.equal(t.userMessage?.text ?? t.message?.text, "do it");
    const parts = t.responseParts as Json[];
    assert.equal(parts.find((p) => p.kind === "markdown")?.content, "hello ");
    assert.equal(parts.find((p) => p.kind === "toolCall")?.toolCall.toolCallId, "tc1");
    // The runtime survived (same instance): its live suffix continues on the restored turn.
    const { be } = await FakeBackend.session(h, hello("inst-1"));
    be.send(ev(reg, { type: "tool_completed", toolCallId: "tc1", toolName: "bash", output: "a b", isError: false }));
    be.send(ev(reg, { type: "text_delta", text: "world" }));
    be.send(ev(reg, { type: "settled", cancelled: false }));
    const end = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
    assert.equal(end.action.error.errorType, "source_observation_gap");
    assert.equal(end.action.error.message, OBSERVATION_GAP_MESSAGE);
    const done = h.state.chatIndex.get(reg.chat)!.turns.find((x) => x.id === "t1")!;
    assert.equal(done.state, "error");
    const text = (done.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content as string).join("");
    assert.equal(text, "hello world", "received output before and after the restart is kept");
    assert.equal((done.responseParts as Json[]).find((p) => p.kind === "toolCall")?.toolCall.status, "completed");
    // Nothing was resent to the runtime.
    await quiet(be);
    assert.equal(be.frames.some((f) => f.type === "command"), false);
    // The client rebuilds the same chat from its snapshot and the envelopes.
    const mirror = structuredClone(snap.state) as Chat;
    mirror.queuedMessages ??= [];
    for (const e of c.actions(reg.chat)) if (e.rejectionReason === undefined) reduceChat(mirror, e.action);
    const fresh = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.deepEqual(mirror.turns.map((x) => [x.id, x.state]), (fresh.turns as Json[]).map((x) => [x.id, x.state]));
    assert.equal(fresh.activeTurn, undefined);
    assert.deepEqual(c.invalid, []);
    // A new turn works normally afterwards, and its success is a success.
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "t2", message: user("again") });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "prompt");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    be.send(ev(reg, { type: "text_delta", text: "ok" }));
    be.send(ev(reg, { type: "settled", cancelled: false }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "t2");
    c.close();
    be.close();
  });
});

test("a restored turn ends with the gap at once when a different, idle runtime instance registers; a busy one keeps it open", async () => {
  const { home, reg } = await onRestoredHost(async (h, reg, c) => {
    // A replacement reporting active work: the turn stays (its settlement is still to come).
    let { be } = await FakeBackend.session(h, hello("inst-2", { runtimeIdle: false }));
    await quiet(be);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t1");
    be.close();
    await be.waitClosed();
    // An idle replacement runs nothing: the turn can never settle, so it ends with the gap now.
    ({ be } = await FakeBackend.session(h, hello("inst-3", { runtimeIdle: true })));
    const end = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
    assert.equal(end.action.error.errorType, "source_observation_gap");
    const done = h.state.chatIndex.get(reg.chat)!.turns.find((x) => x.id === "t1")!;
    assert.equal((done.responseParts as Json[]).find((p) => p.kind === "markdown")?.content, "hello ");
    assert.equal((done.responseParts as Json[]).find((p) => p.kind === "toolCall")?.toolCall.status, "cancelled");
    await quiet(be);
    assert.equal(be.frames.some((f) => f.type === "command"), false, "the message was not resent");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  });
  // The ended turn stays ended across a further restart (no checkpoint is left behind).
  await withHost(
    (h) => {
      const chat = h.state.chatIndex.get(reg.chat)!;
      assert.equal(chat.activeTurn, undefined);
      assert.deepEqual(chat.turns.map((t) => `${String(t.id)}:${String(t.state)}`), ["t1:error"]);
      return Promise.resolve();
    },
    { home },
  );
});

test("a client may cancel a restored turn while no runtime serves it", async () => {
  await onRestoredHost(async (h, reg, c) => {
    const seq = c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "t1" });
    const echo = await c.action((e) => e.origin?.clientSeq === seq);
    assert.equal(echo.rejectionReason, undefined);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
  });
});

test("the last registering instance survives the restart: an empty restored turn of a replaced native-Pi runtime ends as backend_admission_indeterminate", async () => {
  const home = tempHome();
  const pi = (instanceId: string, extra: Json = {}) => ({ protocolVersion: 9, sourceId: "pi-restore", instanceId, provider: "pi", ...extra });
  const reg = await turnInterrupted(home, pi("gen-1"), "p1", "maybe received", (be) => quiet(be));
  await withHost(
    async (h) => {
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
      assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "p1");
      const { be } = await FakeBackend.session(h, pi("gen-2", { runtimeIdle: true }));
      const err = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "p1");
      assert.equal(err.action.error.errorType, "backend_admission_indeterminate");
      assert.deepEqual(err.action.error._meta, { "paratenic.previousInstanceId": "gen-1", "paratenic.instanceId": "gen-2" });
      await quiet(be);
      assert.equal(be.frames.some((f) => f.type === "command"), false, "nothing replayed");
      assert.deepEqual(c.invalid, []);
      c.close();
      be.close();
    },
    { home },
  );
});

test("an idle replacement's own ended record of the restored turn (its history) adds the text the host had not checkpointed", async () => {
  const home = tempHome();
  const reg = await turnInterrupted(home, hello("inst-1"), "t1", "do it", async (be, reg, c) => {
    be.send(ev(reg, { type: "thinking_delta", text: "why " }));
    be.send(ev(reg, { type: "text_delta", text: "hello " }));
    await c.action((e) => e.action.type === "chat/responsePart" && e.action.part.kind === "markdown");
  });
  await withHost(
    async (h) => {
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
      // The runtime recorded more than the host held; its record states no reasoning (Berth's history has none).
      const record = { id: "t1", userText: "do it", responseText: "hello world", cancelled: true };
      const { be } = await FakeBackend.session(h, hello("inst-2", { runtimeIdle: true, history: [record] }));
      const end = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
      assert.equal(end.action.error.errorType, "source_observation_gap");
      assert.equal(end.action.error.message, OBSERVATION_GAP_MESSAGE);
      const chat = h.state.chatIndex.get(reg.chat)!;
      assert.deepEqual(chat.turns.map((t) => t.id), ["t1"], "the record is not a second turn");
      const parts = chat.turns[0]!.responseParts as Json[];
      assert.equal(parts.filter((p) => p.kind === "markdown").map((p) => p.content as string).join(""), "hello world");
      assert.equal(parts.filter((p) => p.kind === "reasoning").map((p) => p.content as string).join(""), "why ");
      await quiet(be);
      assert.equal(be.frames.some((f) => f.type === "command"), false, "the message was not resent");
      assert.deepEqual(c.invalid, []);
      c.close();
      be.close();
    },
    { home },
  );
});

test("a record whose text does not extend the restored turn's changes nothing: the host keeps what it received", async () => {
  await onRestoredHost(async (h, reg, c) => {
    // Shorter than what the host holds (the host's checkpoint was newer than the runtime's record).
    const { be } = await FakeBackend.session(h, hello("inst-2", { runtimeIdle: true, history: [{ id: "t1", userText: "do it", responseText: "hel", cancelled: true }] }));
    await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
    await quiet(be);
    be.close();
    const done = h.state.chatIndex.get(reg.chat)!.turns.find((x) => x.id === "t1")!;
    assert.equal(done.state, "error");
    assert.equal((done.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content as string).join(""), "hello ");
    assert.deepEqual(c.invalid, []);
    c.close();
  });
});
