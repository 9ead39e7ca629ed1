/**
 * AHP session status flags (IsRead 32, IsArchived 64, OR-ed onto the exclusive activity value):
 * from a v6 backend's `resource_action` and from clients, announced on the session channel and to
 * root subscribers, cleared as AHP says when the session changes, persisted across a host restart.
 * The mirror applies the public session reducer's flag semantics (set or clear one bit, keep the
 * activity bits) and the root catalogue's merge of `root/sessionSummaryChanged` changes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, until, type Json, withHost } from "./helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { SUPPORTED_AHP_BASELINES } from "../../src/protocols/host/ahp-version.js";
import { flagsKnownTo } from "../../src/protocols/host/status-flags.js";
import { reduceSession, type SessionState } from "../../src/client/ahp/reducer.js";

const IS_READ = 32;
const IS_ARCHIVED = 64;
const ACTIVITY = [1, 2, 8, 24];
const withFlag = (status: number, flag: number, on: boolean) => (on ? status | flag : status & ~flag);
const ra = (channel: string, action: Json) => ({ type: "resource_action", channel, action });

/** Session status and root summary status as a client rebuilds them from what it receives. */
class FlagMirror {
  session = 0;
  root = 0;
  /** The session through the project's client reducer (the web UI's). */
  client = {} as SessionState;
  private seen = 0;
  private notes = 0;
  constructor(
    readonly c: AhpClient,
    readonly uri: string,
  ) {}
  async load(): Promise<void> {
    const snap = (await this.c.request("subscribe", { channel: this.uri })).result.snapshot.state as SessionState;
    this.session = snap.status as number;
    this.client = snap;
    this.root = ((await this.c.request("listSessions", {})).result.items as Json[]).find((i) => i.resource === this.uri)!.status as number;
    this.seen = this.c.actions().length;
    this.notes = this.c.notes.length;
  }
  /** Reduce what arrived since the last call; then compare with the host's fresh state. */
  async check(h: HostHandle, step: string): Promise<void> {
    // A request's answer comes after every envelope the host published before handling it.
    const fresh = (await this.c.request("subscribe", { channel: this.uri })).result.snapshot.state.status as number;
    const listed = ((await this.c.request("listSessions", {})).result.items as Json[]).find((i) => i.resource === this.uri)!.status as number;
    assert.ok(h.state.sessions.has(this.uri), `${step}: session known`);
    for (const e of this.c.actions().slice(this.seen)) {
      if (e.channel !== this.uri || e.rejectionReason !== undefined) continue;
      this.client = reduceSession(this.client, e.action as Json);
      if (e.action.type === "session/isReadChanged") this.session = withFlag(this.session, IS_READ, e.action.isRead);
      if (e.action.type === "session/isArchivedChanged") this.session = withFlag(this.session, IS_ARCHIVED, e.action.isArchived);
    }
    for (const n of this.c.notes.slice(this.notes)) if (n.method === "root/sessionSummaryChanged" && n.params.session === this.uri && n.params.changes.status !== undefined) this.root = n.params.changes.status;
    this.seen = this.c.actions().length;
    this.notes = this.c.notes.length;
    assert.ok(ACTIVITY.includes(fresh & 31), `${step}: one exclusive activity value in ${fresh}`);
    assert.equal(fresh & ~31 & ~(IS_READ | IS_ARCHIVED), 0, `${step}: no bit beyond the flags`);
    assert.equal(this.session & ~31, fresh & ~31, `${step}: session flags rebuilt from envelopes`);
    assert.equal((this.client.status as number) & ~31, fresh & ~31, `${step}: the client reducer agrees`);
    assert.equal(this.root, listed, `${step}: root summary status rebuilt from notifications`);
    assert.equal(listed, fresh, `${step}: summary and state agree`);
    assert.deepEqual(this.c.invalid, [], `${step}: every message validates`);
  }
}

test("status flags: every negotiated AHP version defines them", () => {
  for (const v of ["0.9.0", "1.0.0", "1.3.2"]) assert.equal(flagsKnownTo(v), true, v);
  assert.deepEqual(SUPPORTED_AHP_BASELINES, [">=1.0.0 <2.0.0", ">=0.9.0 <0.10.0"], "a new baseline must be checked against STATUS_FLAGS_SINCE");
  assert.equal(flagsKnownTo("0.0.9"), false);
});

test("status flags: backend and client changes, unread on new work, announcements, restart", async () => {
  const home = tempHome();
  let uri = "";
  await withHost(async (h1) => {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "flags", inputCapabilities: { freeform: true } });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    uri = reg.session;
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    const { c } = await AhpClient.init(h1, ["ahp-root://"], "flags-client");
    const m = new FlagMirror(c, uri);
    await m.load();
    assert.equal(m.session, 1, "idle, no flags");
    await m.check(h1, "start");

    // The backend marks the session read.
    ev(ra(uri, { type: "session/isReadChanged", isRead: true }));
    await c.action((e) => e.action.type === "session/isReadChanged" && e.action.isRead === true);
    await m.check(h1, "backend isRead");
    assert.equal(m.root, 1 | IS_READ);

    // A client archives it: host-owned, echoed at once with its origin, nothing sent to the backend.
    const seq = c.dispatch(uri, { type: "session/isArchivedChanged", isArchived: true });
    const echo = await c.action((e) => e.origin?.clientSeq === seq);
    assert.equal(echo.rejectionReason, undefined);
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "a flag change is not forwarded");
    await m.check(h1, "client isArchived");
    assert.equal(m.root, 1 | IS_READ | IS_ARCHIVED);

    // Malformed: refused with the reason, from either side; nothing changes.
    const bad = c.dispatch(uri, { type: "session/isReadChanged", isRead: "yes" });
    assert.match((await c.action((e) => e.origin?.clientSeq === bad)).rejectionReason, /needs isRead: boolean/);
    const extra = c.dispatch(uri, { type: "session/isArchivedChanged", isArchived: false, why: 1 });
    assert.match((await c.action((e) => e.origin?.clientSeq === extra)).rejectionReason, /needs isArchived: boolean \(and nothing else\)/);
    ev(ra(uri, { type: "session/isArchivedChanged" }));
    assert.match((await be.nextType("error")).message, /invalid "session\/isArchivedChanged": isArchived/);
    await m.check(h1, "refusals");

    // A new turn modifies the session: it becomes unread (announced), the archive flag stays.
    ev({ type: "user_message", text: "hi", turnId: "T1" });
    await c.action((e) => e.action.type === "session/isReadChanged" && e.action.isRead === false);
    await m.check(h1, "turn started");
    assert.equal(m.root, 8 | IS_ARCHIVED);
    ev({ type: "settled", cancelled: false });
    await until(() => m.c.notes.some((n) => n.method === "root/sessionSummaryChanged" && n.params.changes.status === (1 | IS_ARCHIVED)), 3000, "idle again");
    await m.check(h1, "turn settled");

    // Read again, then a runtime input request asks the user: unread, InputNeeded, still archived.
    c.dispatch(uri, { type: "session/isReadChanged", isRead: true });
    await until(() => m.c.notes.some((n) => n.method === "root/sessionSummaryChanged" && n.params.changes.status === (1 | IS_READ | IS_ARCHIVED)), 3000, "read");
    await m.check(h1, "read again");
    ev({ type: "input_requested", request: { id: "q1", message: "Continue?" } });
    await c.action((e) => e.action.type === "session/inputNeededSet");
    await until(() => m.c.notes.some((n) => n.method === "root/sessionSummaryChanged" && n.params.changes.status === (24 | IS_ARCHIVED)), 3000, "input needed");
    await m.check(h1, "input requested");
    // Idempotent: marking read twice is accepted (two clients may both do it).
    c.dispatch(uri, { type: "session/isReadChanged", isRead: true });
    const twice = c.dispatch(uri, { type: "session/isReadChanged", isRead: true });
    assert.equal((await c.action((e) => e.origin?.clientSeq === twice)).rejectionReason, undefined);
    await m.check(h1, "read twice");

    // A 0.9 client knows the flags too.
    const old = await AhpClient.open(h1);
    const r = await old.request("initialize", { channel: "ahp-root://", protocolVersions: ["0.9.0"], clientId: "old", initialSubscriptions: [uri] });
    assert.equal(r.result.protocolVersion, "0.9.0");
    assert.equal(r.result.snapshots[0].state.status, 24 | IS_READ | IS_ARCHIVED);
    ev(ra(uri, { type: "session/isArchivedChanged", isArchived: false }));
    await old.action((e) => e.action.type === "session/isArchivedChanged" && e.action.isArchived === false);
    await m.check(h1, "unarchived by the backend");
    c.dispatch(uri, { type: "session/isArchivedChanged", isArchived: true });
    await until(() => m.c.notes.some((n) => n.method === "root/sessionSummaryChanged" && n.params.changes.status === (24 | IS_READ | IS_ARCHIVED)), 3000, "archived again");
    await m.check(h1, "archived again");
    assert.deepEqual(old.invalid, []);
    old.close();
    c.close();
    be.close();
  }, { home });

  // The flags are durable: a restarted host reports them before any backend returns.
  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, ["ahp-root://"], "after");
    const m = new FlagMirror(c, uri);
    await m.load();
    assert.equal(m.session & ~31, IS_READ | IS_ARCHIVED, "flags restored");
    await m.check(h2, "restored");
    c.dispatch(uri, { type: "session/isArchivedChanged", isArchived: false });
    await until(() => m.c.notes.some((n) => n.method === "root/sessionSummaryChanged" && n.params.changes.status === ((m.session & 31) | IS_READ)), 3000, "unarchived");
    await m.check(h2, "unarchived after restart");
    c.close();
  }, { home });
});

test("chat status flags (AHP 0.9): set from either side, kept by the catalogue, cleared by new work, persisted", async () => {
  const home = tempHome();
  let reg: Json = {};
  /** Chat status as the public chat reducer keeps it: flags survive, IsRead clears when a turn starts or input opens. */
  let mirror = 0;
  let catalogue = 0;
  let seen = 0;
  const replay = (c: AhpClient) => {
    for (const e of c.actions().slice(seen)) {
      if (e.rejectionReason !== undefined) continue;
      const a = e.action;
      if (e.channel === reg.chat) {
        if (a.type === "chat/isReadChanged") mirror = withFlag(mirror, IS_READ, a.isRead);
        if (a.type === "chat/isArchivedChanged") mirror = withFlag(mirror, IS_ARCHIVED, a.isArchived);
        if (a.type === "chat/turnStarted") mirror = (mirror & ~31 & ~IS_READ) | 8;
        if (a.type === "chat/turnComplete") mirror = (mirror & ~31) | 1;
      }
      if (e.channel === reg.session && a.type === "session/chatUpdated" && a.chat === reg.chat && a.changes.status !== undefined) catalogue = a.changes.status;
    }
    seen = c.actions().length;
  };
  const check = async (c: AhpClient, step: string) => {
    const chat = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    const session = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    replay(c);
    assert.equal(mirror, chat.status, `${step}: chat status rebuilt from envelopes`);
    assert.equal(catalogue, session.chats.find((x: Json) => x.resource === reg.chat).status, `${step}: catalogue status from session/chatUpdated`);
    assert.equal(catalogue, chat.status, `${step}: catalogue and chat agree`);
    assert.deepEqual(c.invalid, [], `${step}: every message validates`);
  };
  await withHost(async (h1) => {
    const s = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "chat-flags" });
    reg = s.reg;
    const ev = (event: Json) => s.be.send({ type: "event", session: reg.session, event });
    const { c, result } = await AhpClient.init(h1, [reg.session, reg.chat], "chat-flags");
    mirror = (result.snapshots as Json[]).find((x) => x.resource === reg.chat)!.state.status;
    catalogue = mirror;
    seen = c.actions().length;
    ev(ra(reg.chat, { type: "chat/isReadChanged", isRead: true }));
    await c.action((e) => e.action.type === "session/chatUpdated");
    await check(c, "backend read");
    assert.equal(mirror, 1 | IS_READ);
    const seq = c.dispatch(reg.chat, { type: "chat/isArchivedChanged", isArchived: true });
    assert.equal((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, undefined);
    await check(c, "client archived");
    assert.equal(mirror, 1 | IS_READ | IS_ARCHIVED);
    assert.equal(((await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json).status, 1, "chat flags stay off the session status");
    const bad = c.dispatch(reg.chat, { type: "chat/isReadChanged" });
    assert.match((await c.action((e) => e.origin?.clientSeq === bad)).rejectionReason, /chat\/isReadChanged needs isRead: boolean/);
    ev({ type: "user_message", text: "hi", turnId: "T1" });
    await c.action((e) => e.action.type === "chat/turnStarted");
    await check(c, "turn started");
    assert.equal(mirror, 8 | IS_ARCHIVED, "a new turn clears the chat's IsRead");
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete");
    await check(c, "turn complete");
    c.dispatch(reg.chat, { type: "chat/isReadChanged", isRead: true });
    await c.action((e) => e.action.type === "chat/isReadChanged" && e.action.isRead === true && e.serverSeq > 0 && e.origin !== undefined);
    await check(c, "read again");
    c.close();
    s.be.close();
  }, { home });
  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [], "after");
    const chat = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.equal(chat.status, 1 | IS_READ | IS_ARCHIVED, "chat flags persisted");
    c.close();
  }, { home });
});
