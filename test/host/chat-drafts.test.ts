/**
 * Client-dispatched chat state shared between clients: `chat/draftChanged`,
 * `chat/inputAnswerChanged` and `chat/queuedMessagesReordered`, through real AHP clients against
 * fake backends. The mirror applies the public chat reducer's semantics (draft replaced or
 * cleared; one question's answer set or removed in the open request; queued messages in the
 * named order) and must equal a fresh snapshot after every step, also after a host restart.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, type Json, withHost } from "./helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { MAX_ANSWER_BYTES, MAX_DRAFT_BYTES } from "../../src/protocols/host/chat-drafts.js";
import { reduceChat, type Chat } from "../../src/client/ahp/reducer.js";

const user = (text: string) => ({ text, origin: { kind: "user" } });
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

/** Chat fields rebuilt from envelopes, and the session's mirror of input requests. */
class ChatMirror {
  chat: Json = {};
  session: Json = {};
  /** The same chat through the project's client reducer (the web UI's). */
  client = {} as Chat;
  private seen = 0;
  constructor(
    readonly c: AhpClient,
    readonly chatUri: string,
    readonly sessionUri: string,
  ) {}
  private async fresh(): Promise<{ chat: Json; session: Json }> {
    const chat = (await this.c.request("subscribe", { channel: this.chatUri })).result.snapshot.state as Json;
    const session = (await this.c.request("subscribe", { channel: this.sessionUri })).result.snapshot.state as Json;
    return { chat, session };
  }
  async load(): Promise<void> {
    const f = await this.fresh();
    this.chat = structuredClone(f.chat);
    this.client = { ...structuredClone(f.chat), queuedMessages: structuredClone(f.chat.queuedMessages ?? []), rev: 0 } as unknown as Chat;
    this.session = structuredClone(f.session);
    this.seen = this.c.actions().length;
  }
  private apply(e: Json): void {
    if (e.rejectionReason !== undefined) return;
    const a = structuredClone(e.action) as Json;
    if (e.channel === this.sessionUri) {
      if (a.type === "session/inputNeededSet") this.session.inputNeeded = [...(this.session.inputNeeded ?? []).filter((r: Json) => r.id !== a.request.id), a.request];
      if (a.type === "session/inputNeededRemoved") this.session.inputNeeded = (this.session.inputNeeded ?? []).filter((r: Json) => r.id !== a.id);
      return;
    }
    if (e.channel !== this.chatUri) return;
    reduceChat(this.client, structuredClone(e.action) as Json);
    const c = this.chat;
    const t = c.activeTurn as Json | undefined;
    switch (a.type) {
      case "chat/draftChanged":
        if (a.draft === undefined) delete c.draft;
        else c.draft = a.draft;
        break;
      case "chat/turnStarted":
        c.activeTurn = { id: a.turnId, responseParts: [] };
        c.queuedMessages = (c.queuedMessages ?? []).filter((m: Json) => m.id !== a.queuedMessageId);
        break;
      case "chat/inputRequested": {
        // Upstream: replaces the open part with the same request id, keeping its answers unless new ones are given.
        const open = t?.responseParts.find((p: Json) => p.kind === "inputRequest" && p.response === undefined && p.request.id === a.request.id);
        if (open) open.request = { ...a.request, ...(a.request.answers === undefined && open.request.answers ? { answers: open.request.answers } : {}) };
        else if (t) t.responseParts.push({ kind: "inputRequest", request: a.request });
        break;
      }
      case "chat/inputAnswerChanged": {
        const part = t?.responseParts.find((p: Json) => p.kind === "inputRequest" && p.response === undefined && p.request.id === a.requestId);
        if (!part) break;
        const answers = { ...(part.request.answers ?? {}) };
        if (a.answer === undefined) delete answers[a.questionId];
        else answers[a.questionId] = a.answer;
        part.request = { ...part.request, answers: Object.keys(answers).length > 0 ? answers : undefined };
        if (part.request.answers === undefined) delete part.request.answers;
        break;
      }
      case "chat/pendingMessageSet":
        if (a.kind === "queued") c.queuedMessages = [...(c.queuedMessages ?? []).filter((m: Json) => m.id !== a.id), { id: a.id, message: a.message }];
        break;
      case "chat/queuedMessagesReordered": {
        const q = (c.queuedMessages ?? []) as Json[];
        const named = (a.order as string[]).map((id) => q.find((m) => m.id === id)).filter((m) => m !== undefined);
        c.queuedMessages = [...named, ...q.filter((m) => !(a.order as string[]).includes(m.id))];
        break;
      }
    }
  }
  async check(h: HostHandle, step: string): Promise<Json> {
    const f = await this.fresh(); // answers come after every envelope published before them
    for (const e of this.c.actions().slice(this.seen)) this.apply(e);
    this.seen = this.c.actions().length;
    const parts = (s: Json) => (s.activeTurn?.responseParts ?? []).filter((p: Json) => p.kind === "inputRequest").map((p: Json) => p.request);
    const queued = (s: Json) => (s.queuedMessages ?? []).map((m: Json) => m.id);
    const inputs = (s: Json) => (s.inputNeeded ?? []).map((r: Json) => ({ id: r.id, answers: r.request?.answers }));
    assert.deepEqual(this.chat.draft, f.chat.draft, `${step}: draft`);
    assert.deepEqual(parts(this.chat), parts(f.chat), `${step}: open input requests`);
    assert.deepEqual(queued(this.chat), queued(f.chat), `${step}: queued order`);
    assert.deepEqual(inputs(this.session), inputs(f.session), `${step}: session input requests`);
    const client = this.client as unknown as Json;
    assert.deepEqual([client.draft, parts(client), queued(client)], [f.chat.draft, parts(f.chat), queued(f.chat)], `${step}: the client reducer agrees`);
    assert.deepEqual(this.c.invalid, [], `${step}: every message validates`);
    assert.ok(h.state.chatIndex.has(this.chatUri));
    return f.chat;
  }
}

async function accept(be: FakeBackend, type: string, accepted = true): Promise<Json> {
  const cmd = await be.next((f) => f.type === "command" && f.command.type === type, type);
  be.send({ type: "command_result", commandId: cmd.commandId, accepted, ...(accepted ? {} : { error: "no" }) });
  return cmd;
}

test("drafts, in-progress answers and queued order are shared between clients and survive a restart", async () => {
  const home = tempHome();
  let reg: Json = {};
  await withHost(async (h1) => {
    const s = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "drafts", inputCapabilities: { freeform: true } });
    reg = s.reg;
    const be = s.be;
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const { c } = await AhpClient.init(h1, [reg.chat, reg.session], "writer");
    const { c: other } = await AhpClient.init(h1, [reg.chat], "reader");
    const m = new ChatMirror(c, reg.chat, reg.session);
    await m.load();

    // A draft is host-owned: echoed at once to every subscriber, nothing sent to the backend.
    const d1 = c.dispatch(reg.chat, { type: "chat/draftChanged", draft: user("half a tho") });
    assert.equal((await c.action((e) => e.origin?.clientSeq === d1)).rejectionReason, undefined);
    await other.action((e) => e.action.type === "chat/draftChanged" && e.action.draft?.text === "half a tho");
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "a draft is not forwarded");
    assert.deepEqual((await m.check(h1, "draft set")).draft, user("half a tho"));

    // The bound: exactly MAX_DRAFT_BYTES encoded is accepted, one byte more is refused.
    const at = user("");
    at.text = "a".repeat(MAX_DRAFT_BYTES - bytes(at));
    assert.equal(bytes(at), MAX_DRAFT_BYTES);
    const okSeq = c.dispatch(reg.chat, { type: "chat/draftChanged", draft: at });
    assert.equal((await c.action((e) => e.origin?.clientSeq === okSeq)).rejectionReason, undefined);
    const past = { ...at, text: at.text + "a" };
    for (const [action, re] of [
      [{ type: "chat/draftChanged", draft: past }, new RegExp(`the draft exceeds ${MAX_DRAFT_BYTES} bytes encoded`)],
      [{ type: "chat/draftChanged", draft: { text: "x", origin: { kind: "agent" } } }, /clients may only draft user messages/],
      [{ type: "chat/draftChanged", draft: "x" }, /needs draft: a Message/],
    ] as Array<[Json, RegExp]>) {
      const seq = c.dispatch(reg.chat, action);
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, re);
    }
    await m.check(h1, "draft at the bound");
    c.dispatch(reg.chat, { type: "chat/draftChanged" });
    await other.action((e) => e.action.type === "chat/draftChanged" && e.action.draft === undefined);
    assert.equal((await m.check(h1, "draft cleared")).draft, undefined);

    // In-progress answers to an input request of the active turn.
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "go", turnId: "T1" } });
    be.send({ type: "event", session: reg.session, event: { type: "input_requested", turnId: "T1", request: { id: "q1", message: "Details", questions: [{ id: "name", kind: "text", message: "Name?" }, { id: "n", kind: "number", message: "How many?" }] } } });
    await c.action((e) => e.action.type === "session/inputNeededSet");
    await m.check(h1, "input requested");
    const a1 = c.dispatch(reg.chat, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "name", answer: { state: "draft", value: { kind: "text", value: "Ad" } } });
    assert.equal((await c.action((e) => e.origin?.clientSeq === a1)).rejectionReason, undefined);
    await other.action((e) => e.action.type === "chat/inputAnswerChanged");
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "no drafts capability: host-owned");
    const snap = await m.check(h1, "answer drafted");
    assert.deepEqual(snap.activeTurn.responseParts.find((p: Json) => p.kind === "inputRequest").request.answers, { name: { state: "draft", value: { kind: "text", value: "Ad" } } });
    assert.deepEqual(m.session.inputNeeded[0].request.answers, { name: { state: "draft", value: { kind: "text", value: "Ad" } } }, "the session's entry carries the answers too");
    c.dispatch(reg.chat, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "n", answer: { state: "submitted", value: { kind: "number", value: 3 } } });
    const atAnswer: Json = { state: "draft", value: { kind: "text", value: "" } };
    atAnswer.value.value = "b".repeat(MAX_ANSWER_BYTES - bytes(atAnswer));
    assert.equal(bytes(atAnswer), MAX_ANSWER_BYTES);
    const a2 = c.dispatch(reg.chat, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "name", answer: atAnswer });
    assert.equal((await c.action((e) => e.origin?.clientSeq === a2)).rejectionReason, undefined);
    for (const [action, re] of [
      [{ type: "chat/inputAnswerChanged", requestId: "q1", questionId: "name", answer: { state: "draft", value: { kind: "text", value: atAnswer.value.value + "b" } } }, new RegExp(`the answer exceeds ${MAX_ANSWER_BYTES} bytes encoded`)],
      [{ type: "chat/inputAnswerChanged", requestId: "q1", questionId: "age", answer: { state: "skipped" } }, /questionId names no question of that request/],
      [{ type: "chat/inputAnswerChanged", requestId: "q9", questionId: "name" }, /no such pending input request in this chat/],
      [{ type: "chat/inputAnswerChanged", requestId: "q1", questionId: "name", answer: { state: "typing" } }, /needs requestId, questionId and an optional ChatInputAnswer/],
    ] as Array<[Json, RegExp]>) {
      const seq = c.dispatch(reg.chat, action);
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, re, JSON.stringify(action).slice(0, 120));
    }
    await m.check(h1, "answers at the bound");
    // The backend replaces the request (same questions, new wording): the answers stay.
    be.send({ type: "event", session: reg.session, event: { type: "input_updated", request: { id: "q1", turnId: "T1", message: "More details", questions: [{ id: "name", kind: "text", message: "Full name?" }, { id: "n", kind: "number", message: "How many?" }] } } });
    await c.action((e) => e.action.type === "chat/inputRequested" && e.action.request.message === "More details");
    const kept = await m.check(h1, "request replaced");
    assert.deepEqual(Object.keys(kept.activeTurn.responseParts.find((p: Json) => p.kind === "inputRequest").request.answers).sort(), ["n", "name"]);
    c.dispatch(reg.chat, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "name" });
    const cleared = await m.check(h1, "one answer removed");
    assert.deepEqual(Object.keys(cleared.activeTurn.responseParts.find((p: Json) => p.kind === "inputRequest").request.answers), ["n"]);

    // Queued messages: the runtime owns delivery, so a reorder goes to the backend first.
    for (const id of ["m1", "m2", "m3"]) {
      const seq = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id, message: user(`later ${id}`) });
      await accept(be, "follow_up");
      await c.action((e) => e.origin?.clientSeq === seq);
    }
    await m.check(h1, "queued");
    const r1 = c.dispatch(reg.chat, { type: "chat/queuedMessagesReordered", order: ["m3", "m1", "m2"] });
    const cmd = await accept(be, "apply_resource_action");
    assert.deepEqual([cmd.chat, cmd.command.channel, cmd.command.action], [reg.chat, reg.chat, { type: "chat/queuedMessagesReordered", order: ["m3", "m1", "m2"] }]);
    assert.equal((await c.action((e) => e.origin?.clientSeq === r1)).rejectionReason, undefined);
    assert.deepEqual((await m.check(h1, "reordered")).queuedMessages.map((q: Json) => q.id), ["m3", "m1", "m2"]);
    const r2 = c.dispatch(reg.chat, { type: "chat/queuedMessagesReordered", order: ["m1", "m2", "m3"] });
    await accept(be, "apply_resource_action", false);
    assert.equal((await c.action((e) => e.origin?.clientSeq === r2)).rejectionReason, "backend refused the action");
    for (const order of [["m1", "m2"], ["m1", "m2", "m3", "m3"], ["m1", "m2", "x"], ["m1", "m2", "m3", "m4"]]) {
      const seq = c.dispatch(reg.chat, { type: "chat/queuedMessagesReordered", order });
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, /order must name exactly the queued message IDs, each once \(3 queued now\)/, order.join());
    }
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "no command for a refused order");
    await m.check(h1, "refused orders");
    c.dispatch(reg.chat, { type: "chat/draftChanged", draft: user("kept across a restart") });
    await other.action((e) => e.action.draft?.text === "kept across a restart");
    await m.check(h1, "before restart");
    c.close();
    other.close();
    be.close();
  }, { home });

  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [], "after");
    const m = new ChatMirror(c, reg.chat, reg.session);
    await m.load();
    assert.deepEqual(m.chat.draft, user("kept across a restart"));
    assert.deepEqual(m.chat.queuedMessages.map((q: Json) => q.id), ["m3", "m1", "m2"]);
    const answers = m.chat.activeTurn.responseParts.find((p: Json) => p.kind === "inputRequest").request.answers;
    assert.deepEqual(answers, { n: { state: "submitted", value: { kind: "number", value: 3 } } }, "the restored turn keeps the answers");
    const seq = c.dispatch(reg.chat, { type: "chat/queuedMessagesReordered", order: ["m1", "m2", "m3"] });
    assert.equal((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, "the host did not send this to the backend: it is not connected; retry once it reconnects");
    c.dispatch(reg.chat, { type: "chat/draftChanged" });
    await c.action((e) => e.action.type === "chat/draftChanged" && e.rejectionReason === undefined);
    await m.check(h2, "after restart");
    c.close();
  }, { home });
});

test("in-progress answers go to a backend that advertised inputCapabilities.drafts; reorders need protocol 6", () =>
  (async () => {
    await withHost(async (h) => {
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "drafting", inputCapabilities: { freeform: true, drafts: true } });
      const { c } = await AhpClient.init(h, [reg.chat, reg.session], "d");
      const m = new ChatMirror(c, reg.chat, reg.session);
      await m.load();
      be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "go", turnId: "T1" } });
      be.send({ type: "event", session: reg.session, event: { type: "input_requested", turnId: "T1", request: { id: "q1", message: "Pick", questions: [{ id: "a", kind: "text", message: "A?" }] } } });
      await c.action((e) => e.action.type === "session/inputNeededSet");
      const answer = { state: "draft", value: { kind: "text", value: "x" } };
      const s1 = c.dispatch(reg.chat, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "a", answer });
      const cmd = await accept(be, "apply_resource_action");
      assert.deepEqual(cmd.command.action, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "a", answer });
      assert.equal((await c.action((e) => e.origin?.clientSeq === s1)).rejectionReason, undefined);
      await m.check(h, "forwarded answer");
      const s2 = c.dispatch(reg.chat, { type: "chat/inputAnswerChanged", requestId: "q1", questionId: "a" });
      await accept(be, "apply_resource_action", false);
      assert.equal((await c.action((e) => e.origin?.clientSeq === s2)).rejectionReason, "backend refused the action");
      await m.check(h, "refused answer");

      const old = await FakeBackend.session(h, { protocolVersion: 5, sourceId: "v5" });
      const { c: c5 } = await AhpClient.init(h, [old.reg.chat], "d5");
      const q = c5.dispatch(old.reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "m1", message: user("later") });
      await accept(old.be, "follow_up");
      await c5.action((e) => e.origin?.clientSeq === q);
      const r = c5.dispatch(old.reg.chat, { type: "chat/queuedMessagesReordered", order: ["m1"] });
      assert.equal((await c5.action((e) => e.origin?.clientSeq === r)).rejectionReason, "the session's backend does not accept resource actions (needs backend protocol 6)");
      assert.deepEqual(c5.invalid, []);
      c.close();
      c5.close();
      be.close();
      old.be.close();
    });
  })());
