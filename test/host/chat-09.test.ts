/**
 * The AHP 0.9 chat families (chat-09.ts): a chat's background work (`chat/backgroundWorkSet`,
 * `chat/backgroundWorkRemoved`), its changeset catalogue (`chat/changesetsChanged`) and resuming a
 * failed turn (`chat/turnResume`, from the backend or dispatched by a client). Fake v6 backends over
 * the real socket, AHP clients over the real WebSocket, every message validated by ahp-schema; after
 * every step the chat rebuilt from envelopes by the project's client reducer over the first
 * snapshot equals a fresh snapshot, also across a host restart.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { AhpClient, FakeBackend, tempHome, until, type Json, withHost } from "./helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";
import { MAX_BACKGROUND_WORK, MAX_BACKGROUND_WORK_BYTES, MAX_CHAT_CHANGESETS, gateChatSnapshot } from "../../src/protocols/host/chat-09.js";
import { STATUS } from "../../src/protocols/host/model.js";

const ra = (channel: string, action: Json): Json => ({ type: "resource_action", channel, action });
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

/** The chat through the client reducer, fed every accepted envelope since its first snapshot. */
class Mirror {
  chat = {} as Chat;
  private seen = 0;
  constructor(
    readonly c: AhpClient,
    readonly uri: string,
  ) {}
  private async fresh(): Promise<Json> {
    return (await this.c.request("subscribe", { channel: this.uri })).result.snapshot.state as Json;
  }
  async load(): Promise<Json> {
    const f = await this.fresh();
    this.chat = { ...structuredClone(f), queuedMessages: structuredClone(f.queuedMessages ?? []), rev: 0 } as unknown as Chat;
    this.seen = this.c.actions().length;
    return f;
  }
  async check(step: string): Promise<Json> {
    const f = await this.fresh(); // the answer follows every envelope published before it
    for (const e of this.c.actions().slice(this.seen)) if (e.channel === this.uri && e.rejectionReason === undefined) reduceChat(this.chat, structuredClone(e.action));
    this.seen = this.c.actions().length;
    const x = this.chat as unknown as Json;
    assert.deepEqual(x.backgroundWork, f.backgroundWork, `${step}: background work`);
    assert.deepEqual(x.changesets, f.changesets, `${step}: changesets`);
    assert.deepEqual(x.turns, f.turns, `${step}: turns`);
    assert.deepEqual(x.activeTurn, f.activeTurn, `${step}: active turn`);
    assert.deepEqual(this.c.invalid, [], `${step}: every message validates`);
    return f;
  }
}

async function reply(be: FakeBackend, type: string, accepted = true): Promise<Json> {
  const cmd = await be.next((f) => f.type === "command" && f.command.type === type, type);
  be.send({ type: "command_result", commandId: cmd.commandId, accepted, ...(accepted ? {} : { error: "no" }) });
  return cmd;
}

test("background work and a chat's changeset catalogue: validated, bounded, published, persisted", async () => {
  const home = tempHome();
  let reg: Json = {};
  let before: Json = {};
  await withHost(async (h1) => {
    const s = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "bg" });
    reg = s.reg;
    const be = s.be;
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const refuse = async (action: Json, re: RegExp) => {
      be.send({ type: "event", session: reg.session, event: ra(reg.chat, action) });
      assert.match((await be.nextType("error")).message, re, JSON.stringify(action).slice(0, 160));
    };
    const set = async (work: Json) => {
      be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/backgroundWorkSet", work }) });
      await c.action((e) => e.action.type === "chat/backgroundWorkSet" && isDeepStrictEqual(e.action.work, work), `set ${String(work.id)}`);
    };
    const { c } = await AhpClient.init(h1, [reg.chat], "bg-client");
    const old = await AhpClient.open(h1);
    const r = await old.request("initialize", { channel: "ahp-root://", protocolVersions: ["0.9.0"], clientId: "old", initialSubscriptions: [reg.chat] });
    assert.equal(r.result.protocolVersion, "0.9.0");
    const m = new Mirror(c, reg.chat);
    assert.equal((await m.load()).backgroundWork, undefined, "absent until the backend lists work");

    const shell = { id: "shell:1", kind: "shell", label: "Watch the tests", startedAt: "2026-12-01T10:00:00.000Z", command: "npm test -- --watch" };
    const sub = { id: "subagent:1", kind: "subagent", label: "Explore", chat: `${reg.chat}/sub`, _meta: { n: 1 } };
    await set(shell);
    await set(sub);
    await old.action((e) => e.action.type === "chat/backgroundWorkSet" && e.action.work.id === "subagent:1", "a 0.9 client receives it");
    assert.deepEqual((await m.check("two entries")).backgroundWork, [shell, sub]);
    const relabelled = { ...shell, label: "Still watching" };
    await set(relabelled);
    assert.deepEqual((await m.check("upserted in place")).backgroundWork, [relabelled, sub]);
    await set({ id: "w:1", kind: "workflow", label: "A newer kind", extra: [1] });

    for (const [action, re] of [
      [{ type: "chat/backgroundWorkSet", work: { id: "s", kind: "shell", label: "x" } }, /^event refused: invalid "chat\/backgroundWorkSet": work/],
      [{ type: "chat/backgroundWorkSet", work: { id: "s", kind: "subagent", label: "x" } }, /invalid "chat\/backgroundWorkSet": work/],
      [{ type: "chat/backgroundWorkSet", work: { id: "", kind: "shell", label: "x", command: "y" } }, /invalid "chat\/backgroundWorkSet": work/],
      [{ type: "chat/backgroundWorkSet", work: shell, extra: 1 }, /invalid "chat\/backgroundWorkSet"/],
      [{ type: "chat/backgroundWorkRemoved", id: "never-listed" }, /chat\/backgroundWorkRemoved: no background work "never-listed" in this chat$/],
      [{ type: "chat/changesetsChanged", changesets: [{ label: "x" }] }, /invalid "chat\/changesetsChanged": changesets/],
    ] as Array<[Json, RegExp]>)
      await refuse(action, re);

    // Bytes per entry: exactly the bound is accepted, one byte more is refused.
    const big: Json = { id: "shell:big", kind: "shell", label: "big", command: "" };
    big.command = "x".repeat(MAX_BACKGROUND_WORK_BYTES - bytes(big));
    assert.equal(bytes(big), MAX_BACKGROUND_WORK_BYTES);
    await set(big);
    await refuse({ type: "chat/backgroundWorkSet", work: { ...big, command: big.command + "x" } }, new RegExp(`the entry exceeds ${MAX_BACKGROUND_WORK_BYTES} bytes encoded`));

    // Entries per chat: up to the bound; a new id past it is refused, an upsert at it is not.
    for (let i = 4; i < MAX_BACKGROUND_WORK; i++) await set({ id: `shell:n${i}`, kind: "shell", label: `n${i}`, command: "sleep 100" });
    assert.equal((await m.check("at the bound")).backgroundWork.length, MAX_BACKGROUND_WORK);
    await refuse({ type: "chat/backgroundWorkSet", work: { id: "shell:one-more", kind: "shell", label: "x", command: "y" } }, new RegExp(`a chat lists at most ${MAX_BACKGROUND_WORK} background work entries`));
    await set({ ...sub, label: "Explore more" });
    for (let i = 4; i < MAX_BACKGROUND_WORK; i++) {
      be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/backgroundWorkRemoved", id: `shell:n${i}` }) });
      await c.action((e) => e.action.type === "chat/backgroundWorkRemoved" && e.action.id === `shell:n${i}`);
    }
    be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/backgroundWorkRemoved", id: "shell:big" }) });
    await c.action((e) => e.action.type === "chat/backgroundWorkRemoved" && e.action.id === "shell:big");
    assert.deepEqual((await m.check("removed")).backgroundWork.map((w: Json) => w.id), ["shell:1", "subagent:1", "w:1"]);

    // The changeset catalogue: replaced, bounded, cleared when absent.
    const cs = (n: number) => Array.from({ length: n }, (_, i) => ({ label: `Turn ${i}`, uriTemplate: `ahp-changeset:/x/turn${i}`, changeKind: "turn" }));
    be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/changesetsChanged", changesets: cs(MAX_CHAT_CHANGESETS) }) });
    await c.action((e) => e.action.type === "chat/changesetsChanged" && e.action.changesets?.length === MAX_CHAT_CHANGESETS);
    await refuse({ type: "chat/changesetsChanged", changesets: cs(MAX_CHAT_CHANGESETS + 1) }, /invalid "chat\/changesetsChanged": changesets/);
    assert.equal((await m.check("catalogue at the bound")).changesets.length, MAX_CHAT_CHANGESETS);
    be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/changesetsChanged" }) });
    await c.action((e) => e.action.type === "chat/changesetsChanged" && e.action.changesets === undefined);
    assert.equal((await m.check("catalogue cleared")).changesets, undefined);
    be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/changesetsChanged", changesets: cs(1) }) });
    await old.action((e) => e.action.type === "chat/changesetsChanged" && e.action.changesets?.length === 1);

    // Clients cannot dispatch them: the host emits them.
    for (const action of [{ type: "chat/backgroundWorkSet", work: shell }, { type: "chat/backgroundWorkRemoved", id: "shell:1" }, { type: "chat/changesetsChanged" }]) {
      const seq = c.dispatch(reg.chat, action);
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, /is emitted by the host, not dispatched by clients$/);
    }
    before = await m.check("before restart");

    // A version that predates the families gets neither field in a snapshot; 0.9 and later get both.
    const snap = h1.state.snapshot(reg.chat) as Json;
    assert.ok(snap.state.backgroundWork && snap.state.changesets);
    const gated = gateChatSnapshot(h1.state, snap, "0.8.0")!.state as Json;
    assert.equal("backgroundWork" in gated || "changesets" in gated, false);
    assert.deepEqual(gateChatSnapshot(h1.state, snap, "0.9.0"), snap);
    const oldSnap = (await old.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.deepEqual([oldSnap.backgroundWork, oldSnap.changesets], [before.backgroundWork, before.changesets]);
    assert.deepEqual(old.invalid, []);
    c.close();
    old.close();
    be.close();
  }, { home });

  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [], "after");
    const m = new Mirror(c, reg.chat);
    const f = await m.load();
    assert.deepEqual([f.backgroundWork, f.changesets], [before.backgroundWork, before.changesets], "persisted with the chat");
    // The backend comes back and removes what ended meanwhile.
    const { be } = await FakeBackend.session(h2, { protocolVersion: 6, sourceId: "bg" });
    be.send({ type: "event", session: reg.session, event: ra(reg.chat, { type: "chat/backgroundWorkRemoved", id: "shell:1" }) });
    await c.action((e) => e.action.type === "chat/backgroundWorkRemoved");
    assert.deepEqual((await m.check("after restart")).backgroundWork.map((w: Json) => w.id), ["subagent:1", "w:1"]);
    c.close();
    be.close();
  }, { home });
});

test("chat/turnResume: a resumable failed turn reopens, the backend continues it, across a restart", async () => {
  const home = tempHome();
  let reg: Json = {};
  let before: Json = {};
  const h1: HostHandle = await startHost({ home, log: () => {} });
  try {
    const s = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "resume" });
    reg = s.reg;
    const be = s.be;
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    const { c } = await AhpClient.init(h1, [reg.chat, reg.session], "resumer");
    const m = new Mirror(c, reg.chat);
    await m.load();
    const ended = (turnId: string, type: string) => c.action((e) => e.action.type === type && e.action.turnId === turnId, `${type} ${turnId}`);
    const reject = async (action: Json, re: RegExp | string) => {
      const seq = c.dispatch(reg.chat, action);
      const got = (await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason;
      if (typeof re === "string") assert.equal(got, re);
      else assert.match(got, re);
    };

    ev({ type: "user_message", text: "go", turnId: "T1" });
    ev({ type: "text_delta", text: "half an answer" });
    ev({ type: "settled", cancelled: false, error: "rate limited", resumable: true });
    const err = await ended("T1", "chat/error");
    assert.deepEqual(err.action.part, { kind: "error", error: { errorType: "backend_error", message: "rate limited" }, resumable: true });
    let f = await m.check("failed resumably");
    assert.equal(f.status & 31, STATUS.Error);

    for (const [action, re] of [
      [{ type: "chat/turnResume", turnId: "T0" }, "chat/turnResume: turnId does not name the chat's latest turn"],
      [{ type: "chat/turnResume" }, "chat/turnResume needs turnId: the chat's latest turn"],
      [{ type: "chat/turnResume", turnId: "T1", extra: 1 }, "chat/turnResume needs turnId: the chat's latest turn"],
    ] as Array<[Json, string]>)
      await reject(action, re);
    await be.roundTrip();
    assert.equal(be.frames.some((x) => x.type === "command"), false, "nothing forwarded for a refused resume");

    // The backend refuses: nothing changes.
    const r0 = c.dispatch(reg.chat, { type: "chat/turnResume", turnId: "T1" });
    await reply(be, "apply_resource_action", false);
    assert.equal((await c.action((e) => e.origin?.clientSeq === r0)).rejectionReason, "backend refused the action");
    assert.equal((await m.check("refused by the backend")).activeTurn, undefined);

    // Accepted: the turn reopens with its message and parts, and the backend continues it.
    const r1 = c.dispatch(reg.chat, { type: "chat/turnResume", turnId: "T1" });
    const cmd = await reply(be, "apply_resource_action");
    assert.deepEqual([cmd.command.channel, cmd.command.action], [reg.chat, { type: "chat/turnResume", turnId: "T1" }]);
    assert.equal((await c.action((e) => e.origin?.clientSeq === r1)).rejectionReason, undefined);
    f = await m.check("reopened");
    assert.equal(f.turns.length, 0, "the turn left the finished turns");
    assert.equal(f.activeTurn.id, "T1");
    assert.deepEqual(f.activeTurn.responseParts.map((p: Json) => p.kind), ["markdown", "error"]);
    assert.equal(f.status & 31, STATUS.InProgress);
    const resumedAt = c.actions().findIndex((e) => e.origin?.clientSeq === r1);
    await c.action((e) => e.channel === reg.session && e.action.type === "session/chatUpdated" && e.action.changes.status === STATUS.InProgress && c.actions().indexOf(e) > resumedAt, "the session's catalogue hears the chat running again");
    await reject({ type: "chat/turnResume", turnId: "T1" }, "chat/turnResume: a turn is already running in this chat");
    ev({ type: "text_delta", text: "and the rest" });
    ev({ type: "settled", cancelled: false });
    await ended("T1", "chat/turnComplete");
    f = await m.check("completed after the resume");
    assert.deepEqual([f.turns.length, f.turns[0].id, f.turns[0].state], [1, "T1", "complete"]);
    assert.deepEqual(f.turns[0].responseParts.map((p: Json) => [p.kind, p.content]), [["markdown", "half an answer"], ["error", undefined], ["markdown", "and the rest"]]);
    await reject({ type: "chat/turnResume", turnId: "T1" }, "chat/turnResume: the latest turn did not end in error");

    // An error not marked resumable cannot be resumed.
    ev({ type: "user_message", text: "again", turnId: "T2" });
    ev({ type: "settled", cancelled: false, error: "bad request" });
    assert.equal((await ended("T2", "chat/error")).action.part.resumable, undefined);
    await reject({ type: "chat/turnResume", turnId: "T2" }, "chat/turnResume: the latest turn's error is not resumable");

    // The backend may resume a turn itself (resource_action), and the refusals are the same.
    ev({ type: "user_message", text: "third", turnId: "T3" });
    ev({ type: "settled", cancelled: false, error: "connection dropped", resumable: true });
    await ended("T3", "chat/error");
    ev(ra(reg.chat, { type: "chat/turnResume", turnId: "T2" }));
    assert.match((await be.nextType("error")).message, /chat\/turnResume: turnId does not name the chat's latest turn$/);
    ev(ra(reg.chat, { type: "chat/turnResume", turnId: "T3" }));
    await c.action((e) => e.action.type === "chat/turnResume" && e.action.turnId === "T3" && e.origin === undefined);
    assert.equal((await m.check("resumed by the backend")).activeTurn.id, "T3");
    ev({ type: "text_delta", text: "recovered" });
    ev({ type: "settled", cancelled: false, error: "dropped again", resumable: true });
    await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "T3" && e.action.error.message === "dropped again");
    before = await m.check("failed again");
    assert.deepEqual(before.turns.map((t: Json) => t.id), ["T1", "T2", "T3"]);
    assert.deepEqual(before.turns[2].responseParts.map((p: Json) => p.kind), ["error", "markdown", "error"]);
    c.close();
    be.close();
  } finally {
    await h1.close();
  }

  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [], "after");
    const m = new Mirror(c, reg.chat);
    const f = await m.load();
    assert.deepEqual(f.turns, before.turns, "each turn once, as before the restart");
    const { be } = await FakeBackend.session(h2, { protocolVersion: 6, sourceId: "resume" });
    const seq = c.dispatch(reg.chat, { type: "chat/turnResume", turnId: "T3" });
    await reply(be, "apply_resource_action");
    assert.equal((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, undefined);
    assert.equal((await m.check("resumed after a restart")).activeTurn.id, "T3");
    c.close();
    be.close();
  }, { home });

  // Below protocol 6 `settled.resumable` is not read, and a client resume is refused.
  await withHost(async (h3) => {
    const { be, reg: r5 } = await FakeBackend.session(h3, { protocolVersion: 5, sourceId: "v5" });
    const { c } = await AhpClient.init(h3, [r5.chat], "v5");
    be.send({ type: "event", session: r5.session, event: { type: "user_message", text: "go", turnId: "T1" } });
    be.send({ type: "event", session: r5.session, event: { type: "settled", cancelled: false, error: "x", resumable: true } });
    assert.equal((await c.action((e) => e.action.type === "chat/error")).action.part.resumable, undefined);
    const seq = c.dispatch(r5.chat, { type: "chat/turnResume", turnId: "T1" });
    assert.equal((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, "chat/turnResume: the latest turn's error is not resumable");
    // A turn the client cancelled leaves the chat draining until the runtime's settled.
    be.send({ type: "event", session: r5.session, event: { type: "user_message", text: "again", turnId: "T2" } });
    await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "T2");
    c.dispatch(r5.chat, { type: "chat/turnCancelled", turnId: "T2" });
    await be.next((f) => f.type === "command" && f.command.type === "abort", "abort");
    const drained = c.dispatch(r5.chat, { type: "chat/turnResume", turnId: "T2" });
    assert.equal((await c.action((e) => e.origin?.clientSeq === drained)).rejectionReason, "chat/turnResume: the backend is still finishing the chat's last turn");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  });
});



test("session/chatsReordered: a full permutation from the backend reorders the catalogue, persisted", async () => {
  const home = tempHome();
  let reg: Json = {};
  let order: string[] = [];
  const h1 = await startHost({ home, log: () => {} });
  try {
    const s = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "order", chatCapabilities: { create: true, dispose: true } });
    reg = s.reg;
    const be = s.be;
    const { c, result } = await AhpClient.init(h1, ["ahp-root://", reg.session], "orderer");
    for (const chat of ["ahp-chat:/o-1", "ahp-chat:/o-2"]) {
      const pending = c.request("createChat", { channel: reg.session, chat });
      await reply(be, "create_chat");
      assert.equal((await pending).error, undefined);
    }
    const first = (result.snapshots as Json[]).find((x) => x.resource === reg.session)!;
    let mirror = structuredClone(first.state) as SessionState;
    const listed = async (step: string): Promise<string[]> => {
      const fresh = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
      mirror = structuredClone(first.state) as SessionState;
      for (const e of c.actions()) if (e.channel === reg.session && e.rejectionReason === undefined && e.serverSeq > (first.fromSeq as number)) mirror = reduceSession(mirror, structuredClone(e.action));
      const uris = (fresh.chats as Json[]).map((x) => x.resource as string);
      assert.deepEqual(mirror.chats.map((x) => x.resource), uris, `${step}: the catalogue rebuilt from envelopes`);
      assert.deepEqual(c.invalid, [], `${step}: every message validates`);
      return uris;
    };
    assert.deepEqual(await listed("created"), [reg.chat, "ahp-chat:/o-1", "ahp-chat:/o-2"]);
    const ev = (action: Json) => be.send({ type: "event", session: reg.session, event: ra(reg.session, action) });
    for (const [chats, re] of [
      [[reg.chat, "ahp-chat:/o-1"], /session\/chatsReordered must name every chat of the session exactly once \(3 chats now\)$/],
      [[reg.chat, "ahp-chat:/o-1", "ahp-chat:/o-1"], /exactly once \(3 chats now\)$/],
      [[reg.chat, "ahp-chat:/o-1", "ahp-chat:/o-2", "ahp-chat:/o-3"], /exactly once \(3 chats now\)$/],
      [[reg.chat, "ahp-chat:/o-1", "ahp-chat:/nope"], /exactly once \(3 chats now\)$/],
      ["x", /^event refused: invalid "session\/chatsReordered": chats /],
    ] as Array<[unknown, RegExp]>) {
      ev({ type: "session/chatsReordered", chats });
      assert.match((await be.nextType("error")).message, re, JSON.stringify(chats));
    }
    order = ["ahp-chat:/o-2", reg.chat, "ahp-chat:/o-1"];
    ev({ type: "session/chatsReordered", chats: order });
    await c.action((e) => e.action.type === "session/chatsReordered");
    await until(() => c.notes.some((n) => n.method === "root/sessionSummaryChanged" && Array.isArray(n.params.changes.chats) && n.params.changes.chats[0]?.resource === "ahp-chat:/o-2"), 3000, "root hears the order");
    assert.deepEqual(await listed("reordered"), order);
    // A client cannot reorder: the host emits it.
    const seq = c.dispatch(reg.session, { type: "session/chatsReordered", chats: [...order].reverse() });
    assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, /unsupported action/);
    assert.deepEqual(await listed("client refused"), order);
    c.close();
    be.close();
  } finally {
    await h1.close();
  }
  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [reg.session], "after");
    const fresh = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.deepEqual((fresh.chats as Json[]).map((x) => x.resource), order, "the order survives a restart");
    c.close();
  }, { home });
});
