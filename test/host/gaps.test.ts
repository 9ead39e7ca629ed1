/**
 * Issue 15 "smaller gaps": runtimeIdle replacement, the handled-input receipt, the input-available
 * signal, /status persistence diagnostics, and behaviour of existing frames that had no test
 * (confirm_tool_result, input_updated, input_snapshot, title_changed, read-only chats,
 * backend_disposed, shutting_down). Fake backends speak the real frames; the AHP client validates
 * everything the host emits.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { persistenceDiagnostics } from "../../src/protocols/host/inspection.js";
import { startHost } from "../../src/protocols/host/host.js";

const user = (text: string) => ({ text, origin: { kind: "user" } });
const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });
type Host = Parameters<Parameters<typeof withHost>[0]>[0];

async function quiet(be: FakeBackend): Promise<void> {
  be.send({ type: "ping", id: "q" });
  await be.next((f) => f.type === "pong" && f.id === "q");
}
/** A client turn accepted by the backend; returns the prompt command. */
async function acceptedTurn(c: AhpClient, be: FakeBackend, chat: string, turnId: string): Promise<Json> {
  c.dispatch(chat, { type: "chat/turnStarted", turnId, message: user("hi") });
  const cmd = await be.next((f) => f.type === "command" && f.command.type === "prompt" && f.command.turnId === turnId);
  be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
  await quiet(be);
  return cmd;
}

test("runtimeIdle replacement: only an exact empty active turn of a replaced native-Pi instance ends as backend_admission_indeterminate", () =>
  withHost(async (h) => {
    const hello = (instanceId: string, extra: Json = {}) => ({ protocolVersion: 9, sourceId: "pi-src", instanceId, provider: "pi", ...extra });
    const first = await FakeBackend.session(h, hello("gen-1"));
    const reg = first.reg;
    let be = first.be;
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("later") });
    const fu = await be.next((f) => f.type === "command" && f.command.type === "follow_up");
    be.send({ type: "command_result", commandId: fu.commandId, accepted: true });
    await acceptedTurn(c, be, reg.chat, "t1");
    be.close();
    await be.waitClosed();

    // Same instance reconnecting: untouched.
    ({ be } = await FakeBackend.session(h, hello("gen-1", { runtimeIdle: true })));
    await quiet(be);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t1");
    be.close();
    await be.waitClosed();
    // A replacement that reports active work: untouched.
    ({ be } = await FakeBackend.session(h, hello("gen-2", { runtimeIdle: false })));
    await quiet(be);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t1");
    be.close();
    await be.waitClosed();
    // A different idle instance: the empty turn ends as indeterminate, naming both instances.
    ({ be } = await FakeBackend.session(h, hello("gen-3", { runtimeIdle: true })));
    const err = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
    assert.equal(err.action.error.errorType, "backend_admission_indeterminate");
    assert.match(err.action.error.message, /not resent/);
    assert.deepEqual(err.action.error._meta, { "paratenic.previousInstanceId": "gen-2", "paratenic.instanceId": "gen-3" });
    assert.deepEqual(err.action.part.error._meta, err.action.error._meta);
    // The queued input is preserved and nothing is replayed to the new instance.
    assert.deepEqual(h.state.chatIndex.get(reg.chat)!.queuedMessages.map((m) => m.id), ["q1"]);
    await quiet(be);
    assert.equal(be.frames.some((f) => f.type === "command"), false);

    // A nonempty turn is untouched by a replacement.
    await acceptedTurn(c, be, reg.chat, "t2");
    be.send(ev(reg, { type: "text_delta", text: "partial" }));
    await quiet(be);
    be.close();
    await be.waitClosed();
    ({ be } = await FakeBackend.session(h, hello("gen-4", { runtimeIdle: true })));
    await quiet(be);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t2");
    be.close();

    // Another provider's replacement is untouched.
    const other = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "x-src", instanceId: "x1", provider: "other" });
    const { c: c2 } = await AhpClient.init(h, ["ahp-root://", other.reg.chat], "c2");
    await acceptedTurn(c2, other.be, other.reg.chat, "x1t");
    other.be.close();
    await other.be.waitClosed();
    const other2 = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "x-src", instanceId: "x2", provider: "other", runtimeIdle: true });
    await quiet(other2.be);
    assert.equal(h.state.chatIndex.get(other.reg.chat)!.activeTurn?.id, "x1t");
    assert.deepEqual([...c.invalid, ...c2.invalid], []);
    c.close();
    c2.close();
    other2.be.close();
  }));

test("command_handled: one-shot receipt for the current instance's retained prompt → backend_input_handled", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 2, sourceId: "h-src", instanceId: "i1" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
    const handled = (commandId: string, extra: Json = {}) => ({ type: "command_handled", commandId, backendInstanceId: "i1", session: reg.session, reason: "recipient-verification-filter", ...extra });

    const cmd = await acceptedTurn(c, be, reg.chat, "t1");
    be.send(handled(cmd.commandId, { backendInstanceId: "other" }));
    assert.match((await be.nextType("error")).message, /not current/);
    be.send(handled("unknown-command"));
    assert.match((await be.nextType("error")).message, /no retained prompt identity/);
    be.send(handled(cmd.commandId));
    const err = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
    assert.equal(err.action.error.errorType, "backend_input_handled");
    assert.match(err.action.error.message, /recipient-verification-filter/);
    be.send(handled(cmd.commandId));
    assert.match((await be.nextType("error")).message, /no retained prompt identity/, "one-shot");

    // agent_started retires the identity before a late callback can settle live work.
    const cmd2 = await acceptedTurn(c, be, reg.chat, "t2");
    be.send(ev(reg, { type: "agent_started" }));
    be.send(handled(cmd2.commandId));
    assert.match((await be.nextType("error")).message, /no retained prompt identity/);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t2");
    be.send(ev(reg, { type: "settled", cancelled: false }));
    // A turn that already has output is not marked handled.
    const cmd3 = await acceptedTurn(c, be, reg.chat, "t3");
    be.send(ev(reg, { type: "text_delta", text: "x" }));
    be.send(handled(cmd3.commandId));
    assert.match((await be.nextType("error")).message, /no longer an empty active turn/);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t3");
    be.close();

    // Version 1 cannot send it.
    const v1 = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "v1-src", instanceId: "i1" });
    v1.be.send({ type: "command_handled", commandId: "x", backendInstanceId: "i1", session: v1.reg.session });
    assert.match((await v1.be.nextType("error")).message, /requires protocol version 2/);
    assert.deepEqual(c.invalid, []);
    c.close();
    v1.be.close();
  }));

test("input availability: paratenic.inputAvailable in summary and session _meta with session/metaChanged; answers fenced", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "in-src", inputCapabilities: { freeform: true } });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    const req = { id: "r1", message: "Pick", questions: [{ id: "q", kind: "single_select", message: "Which?", options: [{ id: "a", label: "A" }] }] };
    be.send(ev(reg, { type: "input_requested", request: req }));
    await c.action((e) => e.action.type === "session/inputNeededSet");
    be.send(ev(reg, { type: "input_snapshot", requests: [], available: false }));
    const meta = await c.action((e) => e.action.type === "session/metaChanged");
    assert.deepEqual(meta.action._meta, { "paratenic.inputAvailable": false });
    await c.note("root/sessionSummaryChanged", (p) => p.changes._meta?.["paratenic.inputAvailable"] === false);
    const list = await c.request("listSessions", { channel: "ahp-root://" });
    assert.equal(list.result.items[0]._meta["paratenic.inputAvailable"], false);
    // The unavailable snapshot neither replaced nor resolved the retained request; answers are refused.
    assert.equal(h.state.chatIndex.get(reg.chat)!.inputs.has("r1"), true);
    const seq = c.dispatch(reg.chat, { type: "chat/inputCompleted", requestId: "r1", response: "accept", answers: { q: "a" } });
    assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, /unavailable/);
    assert.equal(be.frames.some((f) => f.type === "command"), false);
    // A fresh available snapshot lifts the fence.
    be.send(ev(reg, { type: "input_snapshot", requests: [req], available: true }));
    await c.action((e) => e.action.type === "session/metaChanged" && e.action._meta["paratenic.inputAvailable"] === true);
    const snap = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state;
    assert.equal(snap._meta["paratenic.inputAvailable"], true);
    c.dispatch(reg.chat, { type: "chat/inputCompleted", requestId: "r1", response: "accept", answers: { q: "a" } });
    const ci = await be.next((f) => f.type === "command" && f.command.type === "complete_input");
    assert.equal(ci.command.requestId, "r1");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("input_updated replaces a pending request; input_snapshot replaces the set (dropped ones cancelled)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 2, sourceId: "iu-src", inputCapabilities: { freeform: true } });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    be.send(ev(reg, { type: "input_requested", request: { id: "r1", message: "first" } }));
    be.send(ev(reg, { type: "input_updated", request: { id: "r1", message: "second" } }));
    await c.action((e) => e.action.type === "chat/inputRequested" && e.action.request.message === "second");
    await quiet(be);
    const s = h.state.sessions.get(reg.session)!;
    assert.equal((s.inputNeeded.get(`input:${reg.chat}:r1`)!.request as Json).message, "second");
    be.send(ev(reg, { type: "input_updated", request: { id: "nope", message: "x" } }));
    assert.match((await be.nextType("error")).message, /not pending/);
    // Snapshot: r1 dropped (cancelled), r2 posted.
    be.send(ev(reg, { type: "input_snapshot", requests: [{ id: "r2", message: "two" }] }));
    const done = await c.action((e) => e.action.type === "chat/inputCompleted" && e.action.requestId === "r1");
    assert.equal(done.action.response, "cancel");
    await c.action((e) => e.action.type === "chat/inputRequested" && e.action.request.id === "r2");
    await quiet(be);
    assert.deepEqual([...s.inputNeeded.keys()], [`input:${reg.chat}:r2`]);
    const snap = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state;
    assert.equal(snap.status, 24);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("confirm_tool_result: result confirmation routed to the v4 backend, echoed after acceptance", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "tr-src", toolCapabilities: { resultConfirmations: true } });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    await acceptedTurn(c, be, reg.chat, "t1");
    be.send(ev(reg, { type: "tool_started", toolCallId: "tc1", toolName: "fetch", input: "{}" }));
    be.send(ev(reg, { type: "tool_result_confirmation_requested", toolCallId: "tc1", output: "secret-ish result", isError: false }));
    await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.requiresResultConfirmation === true);
    const seq = c.dispatch(reg.chat, { type: "chat/toolCallResultConfirmed", turnId: "t1", toolCallId: "tc1", approved: true });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "confirm_tool_result");
    assert.deepEqual(cmd.command, { type: "confirm_tool_result", turnId: "t1", toolCallId: "tc1", approved: true });
    assert.equal(c.actions(reg.chat).some((e) => e.origin?.clientSeq === seq), false, "not echoed before acceptance");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const echo = await c.action((e) => e.origin?.clientSeq === seq);
    assert.equal(echo.rejectionReason, undefined);
    assert.equal(echo.action.type, "chat/toolCallResultConfirmed");
    // A second confirmation of the same call is refused (no longer pending).
    const again = c.dispatch(reg.chat, { type: "chat/toolCallResultConfirmed", turnId: "t1", toolCallId: "tc1", approved: false });
    assert.match((await c.action((e) => e.origin?.clientSeq === again)).rejectionReason, /not awaiting/);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("title_changed and read-only chats", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 7, sourceId: "ro-src", title: "Old", interactivity: "read-only" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    be.send(ev(reg, { type: "title_changed", title: "New title" }));
    await c.action((e) => e.channel === reg.session && e.action.type === "session/titleChanged" && e.action.title === "New title");
    await c.note("root/sessionSummaryChanged", (p) => p.changes.title === "New title");
    const list = await c.request("listSessions", { channel: "ahp-root://" });
    assert.equal(list.result.items[0].title, "New title");
    assert.equal(list.result.items[0].chats[0].interactivity, "read-only");
    const snap = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state;
    assert.equal(snap.chats[0].interactivity, "read-only");
    const s1 = c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "t", message: user("hi") });
    assert.equal((await c.action((e) => e.origin?.clientSeq === s1)).rejectionReason, "chat is read-only");
    const s2 = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q", message: user("hi") });
    assert.equal((await c.action((e) => e.origin?.clientSeq === s2)).rejectionReason, "chat is read-only");
    await quiet(be);
    assert.equal(be.frames.some((f) => f.type === "command"), false, "nothing reached the backend");
    // The backend's own turns still stream into the read-only chat.
    be.send(ev(reg, { type: "user_message", text: "from the source" }));
    be.send(ev(reg, { type: "settled", cancelled: false }));
    await c.action((e) => e.action.type === "chat/turnComplete");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("backend_disposed: a dedicated connection is closed, a multiplexed route retired without closing its provider", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "d-src" });
    const { c } = await AhpClient.init(h);
    assert.equal((await c.request("disposeSession", { channel: reg.session })).result, null);
    const e = await be.nextType("error");
    assert.equal(e.code, "backend_disposed");
    assert.equal(e.fatal, true);
    await be.waitClosed();

    const p = await FakeBackend.provider(h, 8, ["mux"]);
    p.be.send({ type: "register_session", requestId: "r", hello: { protocolVersion: 8, instanceId: "s", sourceId: "m-src", provider: "mux" } });
    const sr = await p.be.nextType("session_registered");
    const disposing = c.request("disposeSession", { channel: sr.session });
    const cmd = await p.be.nextType("provider_command");
    assert.equal(cmd.command.type, "dispose_session");
    p.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await disposing).result, null);
    const d = await p.be.nextType("error");
    assert.equal(d.code, "backend_disposed");
    assert.equal(d.session, sr.session);
    assert.equal(d.backendConnectionId, sr.backendConnectionId);
    assert.equal(d.fatal, undefined);
    await quiet(p.be);
    assert.equal(p.be.closed, false);
    assert.deepEqual(c.invalid, []);
    c.close();
    p.be.close();
  }));

test("shutting_down: closing the host tells every backend connection, then closes it", async () => {
  const h = await startHost({ home: tempHome(), log: () => {} });
  const a = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "a" });
  const p = await FakeBackend.provider(h, 9, ["p"]);
  await h.close();
  for (const be of [a.be, p.be]) {
    const e = await be.nextType("error");
    assert.equal(e.code, "shutting_down");
    assert.equal(e.fatal, true);
    await be.waitClosed();
  }
});

test("/status persistence diagnostics: aggregate counts only, no identities", () =>
  withHost(async (h: Host) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "diag-src", title: "Private title" });
    const body = await new Promise<string>((resolve, reject) => {
      request(`${h.httpUrl}/status`, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      })
        .on("error", reject)
        .end();
    });
    const st = JSON.parse(body) as Json;
    assert.deepEqual(Object.keys(st.persistence).sort(), ["activeCheckpoints", "activeFullSave", "engine", "pendingCheckpoints"]);
    assert.equal(st.persistence.engine, "sqlite");
    assert.equal(typeof st.persistence.pendingCheckpoints, "number");
    assert.equal(st.persistence.activeFullSave, null, "commits are synchronous: none is ever observed in progress");
    assert.ok(!body.includes(reg.session) && !body.includes("Private title"));
    // Writes queued in this event-loop turn are counted until the commit.
    h.state.persistSession(h.state.sessions.get(reg.session)!);
    assert.ok((persistenceDiagnostics(h.state).pendingCheckpoints as number) >= 1);
    h.state.store.flush();
    assert.equal(persistenceDiagnostics(h.state).pendingCheckpoints, 0);
    be.close();
  }));
