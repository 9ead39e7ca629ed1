/**
 * AHP `session/workingDirectorySet` / `session/workingDirectoryRemoved`, gated by the
 * `multipleWorkingDirectories` capability a v6 backend advertises in `hello`: from the backend
 * (`resource_action`) and from clients (sent as `apply_resource_action`, echoed once accepted).
 * The mirror applies the public reducer's membership semantics (append when absent, remove when
 * present) to the session state and the root catalogue's merge of summary changes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, type Json, withHost } from "./helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { MAX_WORKING_DIRECTORIES } from "../../src/protocols/host/working-dirs.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";

const ra = (channel: string, action: Json) => ({ type: "resource_action", channel, action });
const CAPABILITY = /needs the multipleWorkingDirectories capability, which this session's backend did not advertise \(hello\.multipleWorkingDirectories, backend protocol 6 or later\)/;

class DirMirror {
  session: string[] = [];
  root: string[] = [];
  /** The session through the project's client reducer (the web UI's). */
  client = {} as SessionState;
  private seen = 0;
  private notes = 0;
  constructor(
    readonly c: AhpClient,
    readonly uri: string,
  ) {}
  private snap: SessionState = {} as SessionState;
  private async fresh(): Promise<{ state: string[]; listed: string[] }> {
    this.snap = (await this.c.request("subscribe", { channel: this.uri })).result.snapshot.state as SessionState;
    const state = (this.snap.workingDirectories ?? []) as string[];
    const listed = (((await this.c.request("listSessions", {})).result.items as Json[]).find((i) => i.resource === this.uri)!.workingDirectories ?? []) as string[];
    return { state, listed };
  }
  async load(): Promise<void> {
    const f = await this.fresh();
    this.session = [...f.state];
    this.root = [...f.listed];
    this.client = this.snap;
    this.seen = this.c.actions().length;
    this.notes = this.c.notes.length;
  }
  async check(h: HostHandle, step: string): Promise<string[]> {
    const f = await this.fresh(); // answers come after every envelope published before them
    for (const e of this.c.actions().slice(this.seen)) {
      if (e.channel !== this.uri || e.rejectionReason !== undefined) continue;
      this.client = reduceSession(this.client, e.action as Json);
      const d = e.action.directory as string;
      if (e.action.type === "session/workingDirectorySet" && !this.session.includes(d)) this.session.push(d);
      if (e.action.type === "session/workingDirectoryRemoved") this.session = this.session.filter((x) => x !== d);
      if (e.action.type === "session/workingDirectoryReplaced" && !this.session.includes(e.action.replacement)) this.session = this.session.map((x) => (x === d ? e.action.replacement : x));
    }
    for (const n of this.c.notes.slice(this.notes)) if (n.method === "root/sessionSummaryChanged" && n.params.session === this.uri && n.params.changes.workingDirectories) this.root = n.params.changes.workingDirectories;
    this.seen = this.c.actions().length;
    this.notes = this.c.notes.length;
    assert.deepEqual(this.session, f.state, `${step}: session state rebuilt from envelopes`);
    assert.deepEqual(this.root, f.listed, `${step}: root summary rebuilt from notifications`);
    assert.deepEqual(this.client.workingDirectories ?? [], f.state, `${step}: the client reducer agrees`);
    assert.deepEqual(this.c.invalid, [], `${step}: every message validates`);
    assert.ok(h.state.sessions.has(this.uri));
    return f.state;
  }
}

test("working directories are refused, with the capability named, when the backend did not advertise it", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "plain" });
    const { c } = await AhpClient.init(h, [reg.session, reg.chat], "wd-plain");
    be.send({ type: "event", session: reg.session, event: ra(reg.session, { type: "session/workingDirectorySet", directory: "file:///a" }) });
    assert.match((await be.nextType("error")).message, CAPABILITY);
    for (const [channel, type] of [[reg.session, "session/workingDirectorySet"], [reg.session, "session/workingDirectoryRemoved"], [reg.session, "session/workingDirectoryReplaced"], [reg.chat, "chat/workingDirectorySet"]]) {
      const seq = c.dispatch(channel, { type, directory: "file:///a", ...(type.endsWith("Replaced") ? { replacement: "file:///b" } : {}) });
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, CAPABILITY);
    }
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "nothing is sent");
    // The capability is a v6 hello field.
    const old = await FakeBackend.session(h, { protocolVersion: 5, sourceId: "old", multipleWorkingDirectories: {} });
    assert.equal(old.reg.type, "error");
    assert.match(old.reg.message, /multipleWorkingDirectories requires protocol version 6/);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
    old.be.close();
  }));

test("working directories: backend and client changes, immutable primary, the bound, restart", async () => {
  const home = tempHome();
  let uri = "";
  await withHost(async (h1) => {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "dirs", multipleWorkingDirectories: { immutablePrimary: true } });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    uri = reg.session;
    const ev = (action: Json) => be.send({ type: "event", session: uri, event: ra(uri, action) });
    const { c } = await AhpClient.init(h1, ["ahp-root://"], "wd-client");
    const m = new DirMirror(c, uri);
    await m.load();

    ev({ type: "session/workingDirectorySet", directory: "file:///a" });
    await c.action((e) => e.action.type === "session/workingDirectorySet");
    assert.deepEqual(await m.check(h1, "backend set"), ["file:///a"]);
    ev({ type: "session/workingDirectorySet", directory: "file:///a" });
    assert.match((await be.nextType("error")).message, /"file:\/\/\/a" is already a working directory of this session/);
    ev({ type: "session/workingDirectoryRemoved", directory: "file:///a" });
    assert.match((await be.nextType("error")).message, /fixed primary \(multipleWorkingDirectories\.immutablePrimary\) and cannot be removed/);

    // A client adds one: sent as apply_resource_action, echoed once accepted.
    const add = c.dispatch(uri, { type: "session/workingDirectorySet", directory: "file:///b" });
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: uri, action: { type: "session/workingDirectorySet", directory: "file:///b" } });
    assert.equal(c.actions(uri).some((e) => e.origin?.clientSeq === add), false, "nothing before the backend answers");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await c.action((e) => e.origin?.clientSeq === add)).rejectionReason, undefined);
    assert.deepEqual(await m.check(h1, "client set"), ["file:///a", "file:///b"]);

    // Refused by the backend: rejected, unchanged.
    const refused = c.dispatch(uri, { type: "session/workingDirectorySet", directory: "file:///c" });
    const cmd2 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: false, error: "no access" });
    assert.equal((await c.action((e) => e.origin?.clientSeq === refused)).rejectionReason, "backend refused the action");
    await m.check(h1, "backend refused");

    // Refused before anything is sent.
    for (const [action, re] of [
      [{ type: "session/workingDirectoryRemoved", directory: "file:///a" }, /fixed primary/],
      [{ type: "session/workingDirectoryReplaced", directory: "file:///a", replacement: "file:///a2" }, /fixed primary \(multipleWorkingDirectories\.immutablePrimary\) and cannot be replaced/],
      [{ type: "session/workingDirectoryRemoved", directory: "file:///zzz" }, /"file:\/\/\/zzz" is not a working directory of this session/],
      [{ type: "session/workingDirectorySet", directory: "file:///b" }, /already a working directory/],
      [{ type: "session/workingDirectorySet", directory: "not a uri" }, /invalid "session\/workingDirectorySet": directory must be an absolute URI/],
      [{ type: "session/workingDirectorySet", directory: `file:///${"x".repeat(4096 - 8 + 1)}` }, /invalid "session\/workingDirectorySet": directory/],
    ] as Array<[Json, RegExp]>) {
      const seq = c.dispatch(uri, action);
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, re, JSON.stringify(action).slice(0, 100));
    }
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "no command for a refused action");

    // A directory URI of exactly 4,096 characters is accepted (one more is refused above).
    const longest = `file:///${"x".repeat(4096 - 8)}`;
    assert.equal(longest.length, 4096);
    ev({ type: "session/workingDirectorySet", directory: longest });
    ev({ type: "session/workingDirectoryRemoved", directory: longest });
    await be.roundTrip();
    await m.check(h1, "longest directory");
    assert.deepEqual(c.actions(uri).filter((e) => e.action.directory === longest).map((e) => e.action.type), ["session/workingDirectorySet", "session/workingDirectoryRemoved"]);

    // A client removes one.
    const rm = c.dispatch(uri, { type: "session/workingDirectoryRemoved", directory: "file:///b" });
    const cmd3 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd3.commandId, accepted: true });
    await c.action((e) => e.origin?.clientSeq === rm);
    assert.deepEqual(await m.check(h1, "client removed"), ["file:///a"]);

    // The bound: exactly MAX_WORKING_DIRECTORIES, one more is refused.
    for (let i = 1; i < MAX_WORKING_DIRECTORIES; i++) ev({ type: "session/workingDirectorySet", directory: `file:///d${i}` });
    await be.roundTrip();
    assert.equal((await m.check(h1, "at the bound")).length, MAX_WORKING_DIRECTORIES);
    ev({ type: "session/workingDirectorySet", directory: "file:///one-past" });
    assert.match((await be.nextType("error")).message, new RegExp(`a session has at most ${MAX_WORKING_DIRECTORIES} working directories`));
    const past = c.dispatch(uri, { type: "session/workingDirectorySet", directory: "file:///one-past" });
    assert.match((await c.action((e) => e.origin?.clientSeq === past)).rejectionReason, /at most 64 working directories/);
    ev({ type: "session/workingDirectoryRemoved", directory: "file:///d63" });
    await be.roundTrip();
    assert.equal((await m.check(h1, "below the bound")).length, MAX_WORKING_DIRECTORIES - 1);
    c.close();
    be.close();
  }, { home });

  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, ["ahp-root://"], "wd-after");
    const m = new DirMirror(c, uri);
    await m.load();
    assert.equal(m.session.length, MAX_WORKING_DIRECTORIES - 1, "persisted with the session");
    assert.equal(m.session[0], "file:///a");
    const seq = c.dispatch(uri, { type: "session/workingDirectorySet", directory: "file:///later" });
    assert.equal((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, "the host did not send this to the backend: it is not connected; retry once it reconnects");
    await m.check(h2, "restored");
    c.close();
  }, { home });
});

test("a v6 provider advertises multipleWorkingDirectories in its AgentInfo capabilities", () =>
  withHost(async (h) => {
    const hello = (version: number, id: string) => ({ type: "provider_hello", protocolVersion: version, instanceId: `pm-${id}`, providers: [{ id, displayName: id, multipleWorkingDirectories: { immutablePrimary: true } }] });
    const old = await FakeBackend.connect(h.backendSocket);
    old.send(hello(5, "old"));
    const refused = await old.nextType("error");
    assert.match(refused.message, /multipleWorkingDirectories requires protocol version 6/);
    const be = await FakeBackend.connect(h.backendSocket);
    be.send(hello(6, "multi"));
    await be.nextType("provider_registered");
    const { c, result } = await AhpClient.init(h, ["ahp-root://"], "agents");
    const agent = (result.snapshots[0].state.agents as Json[]).find((a) => a.provider === "multi")!;
    assert.deepEqual(agent.capabilities, { multipleWorkingDirectories: { immutablePrimary: true } });
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
    old.close();
  }));

test("session/workingDirectoryReplaced (AHP 0.8): a primary slot is replaced, never removed", () =>
  withHost(async (h) => {
    const both = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "both", multipleWorkingDirectories: { immutablePrimary: true, primaryReplacement: true } });
    assert.equal(both.reg.type, "error");
    assert.match(both.reg.message, /immutablePrimary and primaryReplacement cannot both be true/);
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "slot", multipleWorkingDirectories: { primaryReplacement: true } });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const uri = reg.session as string;
    const ev = (action: Json) => be.send({ type: "event", session: uri, event: ra(uri, action) });
    const { c } = await AhpClient.init(h, ["ahp-root://"], "slot-client");
    const m = new DirMirror(c, uri);
    await m.load();
    ev({ type: "session/workingDirectorySet", directory: "file:///a" });
    ev({ type: "session/workingDirectorySet", directory: "file:///b" });
    await be.roundTrip();
    assert.deepEqual(await m.check(h, "two"), ["file:///a", "file:///b"]);
    const rm = c.dispatch(uri, { type: "session/workingDirectoryRemoved", directory: "file:///a" });
    assert.match((await c.action((e) => e.origin?.clientSeq === rm)).rejectionReason, /primary slot \(multipleWorkingDirectories\.primaryReplacement\): replace it with session\/workingDirectoryReplaced instead/);
    const rp = c.dispatch(uri, { type: "session/workingDirectoryReplaced", directory: "file:///a", replacement: "file:///a2" });
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: uri, action: { type: "session/workingDirectoryReplaced", directory: "file:///a", replacement: "file:///a2" } });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await c.action((e) => e.origin?.clientSeq === rp)).rejectionReason, undefined);
    assert.deepEqual(await m.check(h, "primary replaced in place"), ["file:///a2", "file:///b"]);
    ev({ type: "session/workingDirectoryReplaced", directory: "file:///b", replacement: "file:///c" });
    await be.roundTrip();
    assert.deepEqual(await m.check(h, "backend replaced"), ["file:///a2", "file:///c"]);
    ev({ type: "session/workingDirectoryReplaced", directory: "file:///a2", replacement: "file:///c" });
    assert.match((await be.nextType("error")).message, /"file:\/\/\/c" is already a working directory of this session/);
    ev({ type: "session/workingDirectoryReplaced", directory: "file:///zzz", replacement: "file:///d" });
    assert.match((await be.nextType("error")).message, /"file:\/\/\/zzz" is not a working directory of this session/);
    ev({ type: "session/workingDirectoryRemoved", directory: "file:///c" });
    await be.roundTrip();
    assert.deepEqual(await m.check(h, "a peer removed"), ["file:///a2"]);
    c.close();
    be.close();
  }));

test("a chat's working-directory subset (AHP 0.7): set and removed from either side, following the session's set", async () => {
  const home = tempHome();
  let reg: Json = {};
  const h1 = await startHost({ home, log: () => {} });
  try {
    const s = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "chat-dirs", multipleWorkingDirectories: {} });
    reg = s.reg;
    const be = s.be;
    const uri = reg.session as string;
    const ev = (channel: string, action: Json) => be.send({ type: "event", session: uri, event: ra(channel, action) });
    const { c, result } = await AhpClient.init(h1, [uri, reg.chat], "chat-dirs");
    const snap = (r: string) => (result.snapshots as Json[]).find((x) => x.resource === r)!.state as Json;
    let chatDirs: string[] | undefined = snap(reg.chat).workingDirectories;
    let catalogue: string[] | undefined = snap(uri).chats.find((x: Json) => x.resource === reg.chat).workingDirectories;
    const client = { ...structuredClone(snap(reg.chat)), queuedMessages: [], rev: 0 } as unknown as Chat;
    let seen = c.actions().length;
    const check = async (step: string): Promise<string[] | undefined> => {
      const chat = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
      const session = (await c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
      for (const e of c.actions().slice(seen)) {
        if (e.rejectionReason !== undefined) continue;
        const a = e.action;
        if (e.channel === reg.chat) {
          reduceChat(client, structuredClone(a));
          if (a.type === "chat/workingDirectorySet" && !(chatDirs ?? []).includes(a.directory)) chatDirs = [...(chatDirs ?? []), a.directory];
          if (a.type === "chat/workingDirectoryRemoved" && chatDirs) chatDirs = chatDirs.filter((d) => d !== a.directory);
        }
        if (e.channel === uri && a.type === "session/chatUpdated" && a.chat === reg.chat && a.changes.workingDirectories) catalogue = a.changes.workingDirectories;
      }
      seen = c.actions().length;
      assert.deepEqual(chatDirs, chat.workingDirectories, `${step}: chat subset rebuilt from envelopes`);
      assert.deepEqual(client.workingDirectories, chat.workingDirectories, `${step}: the client reducer agrees`);
      assert.deepEqual(catalogue, session.chats.find((x: Json) => x.resource === reg.chat).workingDirectories, `${step}: catalogue from session/chatUpdated`);
      for (const d of chat.workingDirectories ?? []) assert.ok(session.workingDirectories.includes(d), `${step}: ${d} is one of the session's`);
      assert.deepEqual(c.invalid, [], `${step}: every message validates`);
      return chat.workingDirectories;
    };
    for (const d of ["file:///a", "file:///b", "file:///c"]) ev(uri, { type: "session/workingDirectorySet", directory: d });
    await be.roundTrip();
    assert.equal(await check("no subset"), undefined, "a chat without a subset sees the whole set");

    const add = c.dispatch(reg.chat, { type: "chat/workingDirectorySet", directory: "file:///a" });
    const cmd = await be.nextType("command");
    assert.deepEqual([cmd.chat, cmd.command], [reg.chat, { type: "apply_resource_action", channel: reg.chat, action: { type: "chat/workingDirectorySet", directory: "file:///a" } }]);
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await c.action((e) => e.origin?.clientSeq === add)).rejectionReason, undefined);
    assert.deepEqual(await check("client narrowed"), ["file:///a"]);
    ev(reg.chat, { type: "chat/workingDirectorySet", directory: "file:///b" });
    await be.roundTrip();
    assert.deepEqual(await check("backend added"), ["file:///a", "file:///b"]);
    for (const [action, re] of [
      [{ type: "chat/workingDirectorySet", directory: "file:///zzz" }, /"file:\/\/\/zzz" is not a working directory of this session \(add it to the session first\)/],
      [{ type: "chat/workingDirectorySet", directory: "file:///b" }, /"file:\/\/\/b" is already one of this chat's working directories/],
      [{ type: "chat/workingDirectoryRemoved", directory: "file:///c" }, /"file:\/\/\/c" is not one of this chat's working directories/],
    ] as Array<[Json, RegExp]>) {
      const seq = c.dispatch(reg.chat, action);
      assert.match((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, re);
    }
    ev(reg.chat, { type: "chat/workingDirectoryRemoved", directory: "file:///zzz" });
    assert.match((await be.nextType("error")).message, /is not one of this chat's working directories/);

    // The session's set moves: the chat's subset follows (it never names a directory the session lost).
    ev(uri, { type: "session/workingDirectoryReplaced", directory: "file:///a", replacement: "file:///a2" });
    await be.roundTrip();
    assert.deepEqual(await check("session replaced"), ["file:///b", "file:///a2"]);
    const rm = c.dispatch(uri, { type: "session/workingDirectoryRemoved", directory: "file:///b" });
    const cmd2 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: true });
    await c.action((e) => e.origin?.clientSeq === rm);
    assert.deepEqual(await check("session removed"), ["file:///a2"]);
    c.close();
    be.close();
  } finally {
    await h1.close();
  }
  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [], "after");
    const chat = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.deepEqual(chat.workingDirectories, ["file:///a2"], "the subset is persisted with the chat");
    c.close();
  }, { home });
});
