/**
 * Seeded fuzzer for the host's newest AHP families (status flags, working directories, drafts and
 * in-progress answers, customizations and toggles, MCP background requests, the 0.9 chat
 * families): random and hostile actions arrive from a v6 backend (`resource_action`: valid ones,
 * wrong types, unknown IDs, oversized values, extra keys) and from AHP clients (`dispatchAction`
 * from a 1.0 client, a 0.9 client and a second client; the backend accepts or refuses what is
 * forwarded to it). After every step: the backend connection is kept and every refusal is an
 * `error` frame with a message; every AHP message validates against ahp-schema; each client's
 * session and chats, rebuilt with the project's client reducer from the first snapshot and every
 * accepted envelope since, equal a fresh snapshot. At the end a restarted host reports the same
 * session and chats. `FUZZ_SEED` / `FUZZ_COUNT` reproduce or lengthen a run (`npm run fuzz`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { prng } from "../helpers/prng.js";
import { pick } from "../helpers/mutate.js";
import { AhpClient, FakeBackend, tempHome, until, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const STEPS = Math.max(200, Math.floor(Number(process.env.FUZZ_COUNT ?? 1500) / 3));

const DIRS = ["file:///a", "file:///b", "file:///c", "file:///d"];
const HOSTILE: unknown[] = [null, 0, -1, 1e308, true, "", "x".repeat(5000), "not a uri", [], {}, [1, "a"], { nested: { deep: [null] } }];

/** A clean AHP client whose state is rebuilt from envelopes and compared with fresh snapshots. */
class Mirror {
  session = {} as SessionState;
  chats = new Map<string, Chat>();
  private seen = 0;
  constructor(
    readonly c: AhpClient,
    readonly uri: string,
    readonly label: string,
  ) {}
  private async fresh(channel: string): Promise<Json> {
    const r = await this.c.request("subscribe", { channel });
    assert.equal(r.error, undefined, `${this.label}: subscribe ${channel}: ${JSON.stringify(r.error)}`);
    return r.result.snapshot.state as Json;
  }
  async load(chats: string[]): Promise<void> {
    this.session = structuredClone(await this.fresh(this.uri)) as SessionState;
    this.chats.clear();
    for (const uri of chats) {
      const f = await this.fresh(uri);
      this.chats.set(uri, { ...structuredClone(f), queuedMessages: structuredClone(f.queuedMessages ?? []), rev: 0 } as unknown as Chat);
    }
    this.seen = this.c.actions().length;
  }
  async check(step: string): Promise<void> {
    const fs = await this.fresh(this.uri);
    const fc = new Map<string, Json>();
    for (const uri of this.chats.keys()) fc.set(uri, await this.fresh(uri));
    for (const e of this.c.actions().slice(this.seen)) {
      if (e.rejectionReason !== undefined) continue;
      if (e.channel === this.uri) this.session = reduceCustomization(this.session, structuredClone(e.action)) ?? reduceSession(this.session, structuredClone(e.action));
      const chat = this.chats.get(e.channel);
      if (chat) reduceChat(chat, structuredClone(e.action));
    }
    this.seen = this.c.actions().length;
    assert.deepEqual(this.c.invalid, [], `${this.label} ${step}: every message validates`);
    const s = this.session as unknown as Json;
    for (const k of ["status", "chats", "activeClients", "workingDirectories", "customizations", "serverTools", "activity", "defaultChat", "inputNeeded"]) assert.deepEqual(s[k], fs[k], `${this.label} ${step}: session ${k} rebuilt from envelopes`);
    for (const [uri, chat] of this.chats) {
      const x = chat as unknown as Json;
      const f = fc.get(uri)!;
      for (const k of ["draft", "workingDirectories", "backgroundWork", "changesets", "inputs", "queuedMessages", "activeTurn", "turns"]) assert.deepEqual(norm(k, x[k]), norm(k, f[k]), `${this.label} ${step}: chat ${uri} ${k} rebuilt from envelopes`);
    }
  }
}

/**
 * The customization actions, which the project's client reducer does not reduce, with the
 * official upstream semantics (the `{id, enabled}` shape both clients here read); else undefined.
 */
function reduceCustomization(s: SessionState, a: Json): SessionState | undefined {
  const list = ((s as Json).customizations ?? []) as Json[];
  const set = (customizations: Json[]): SessionState => ({ ...s, customizations });
  switch (a.type) {
    case "session/customizationUpdated": {
      const i = list.findIndex((c) => c.id === a.customization.id);
      return set(i >= 0 ? list.map((c, j) => (j === i ? a.customization : c)) : [...list, a.customization]);
    }
    case "session/customizationRemoved":
      if (list.some((c) => c.id === a.id)) return set(list.filter((c) => c.id !== a.id));
      return set(list.map((c) => (Array.isArray(c.children) ? { ...c, children: c.children.filter((x: Json) => x.id !== a.id) } : c)));
    case "session/customizationToggled":
      if (list.some((c) => c.id === a.id)) return set(list.map((c) => (c.id === a.id ? { ...c, enabled: a.enabled } : c)));
      return set(list.map((c) => (Array.isArray(c.children) && c.type !== "mcpServer" ? { ...c, children: c.children.map((x: Json) => (x.id === a.id ? { ...x, enabled: a.enabled } : x)) } : c)));
  }
  return undefined;
}

/** The client reducer keeps an empty queue where a snapshot omits it. */
const norm = (k: string, v: unknown): unknown => (k === "queuedMessages" && v === undefined ? [] : v);
const user = (text: string): Json => ({ text, origin: { kind: "user" } });
const plugin = (id: string, kids: string[] = []): Json => ({ type: "plugin", id, uri: `file:///plugins/${id}`, name: id, children: kids.map((k) => ({ type: "skill", id: k, uri: `file:///skills/${k}`, name: k })) });

/** A random action of the families under test, for `side`, on one of the channels. */
function gen(r: () => number, side: "backend" | "client", session: string, chats: string[], turns: string[], clientId = ""): { channel: string; action: Json } {
  const chat = pick(r, chats);
  const dir = pick(r, DIRS);
  const cid = pick(r, ["p1", "p2", "d1", "k1", "k2", TOOLS_SERVER.id, "ghost"]);
  const choices: Array<[string, Json]> = [
    [session, { type: "session/isReadChanged", isRead: r() < 0.5 }],
    [session, { type: "session/isArchivedChanged", isArchived: r() < 0.5 }],
    [session, { type: "session/workingDirectorySet", directory: dir }],
    [session, { type: "session/workingDirectoryRemoved", directory: dir }],
    [session, { type: "session/workingDirectoryReplaced", directory: dir, replacement: pick(r, DIRS) }],
    [session, { type: "session/customizationToggled", id: cid, ...(r() < 0.5 ? { enabled: r() < 0.5 } : { enablement: [{ kind: "session", enabled: r() < 0.5 }] }) }],
    [session, { type: "session/chatsReordered", chats: r() < 0.7 ? [...chats].sort(() => r() - 0.5) : [chat] }],
    [chat, { type: "chat/isReadChanged", isRead: r() < 0.5 }],
    [chat, { type: "chat/isArchivedChanged", isArchived: r() < 0.5 }],
    [chat, { type: "chat/workingDirectorySet", directory: dir }],
    [chat, { type: "chat/workingDirectoryRemoved", directory: dir }],
    [chat, { type: "chat/backgroundWorkSet", work: { id: pick(r, ["w1", "w2", "w3"]), kind: "shell", label: "job", command: "sleep 1" } }],
    [chat, { type: "chat/backgroundWorkRemoved", id: pick(r, ["w1", "w2", "w3"]) }],
    [chat, { type: "chat/changesetsChanged", ...(r() < 0.7 ? { changesets: [{ label: "L", uriTemplate: "ahp-changeset:/x/{id}", changeKind: "edit" }] } : {}) }],
    [chat, { type: "chat/turnResume", turnId: pick(r, [...turns.slice(-2), "nope"]) }],
  ];
  if (side === "backend") {
    choices.push(
      [session, { type: "session/customizationUpdated", customization: r() < 0.5 ? plugin(pick(r, ["p1", "p2"]), r() < 0.5 ? ["k1"] : ["k2"]) : { type: "directory", id: "d1", uri: "file:///d", name: "D", enabled: true, contents: "skill", writable: false } }],
      [session, { type: "session/customizationRemoved", id: cid }],
      [session, { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: r() < 0.5 ? { kind: "starting", blocking: true } : { kind: "running" } }],
    );
  } else {
    choices.push(
      [chat, { type: "chat/draftChanged", ...(r() < 0.8 ? { draft: user(pick(r, ["a", "bb", "draft"])) } : {}) }],
      [chat, { type: "chat/inputAnswerChanged", requestId: pick(r, ["q1", "q9"]), questionId: pick(r, ["a", "b"]), ...(r() < 0.8 ? { answer: { state: "draft", value: { kind: "text", value: "v" } } } : {}) }],
      [chat, { type: "chat/queuedMessagesReordered", order: [] }],
      [session, { type: "session/mcpServerBackgroundRequested", id: pick(r, [TOOLS_SERVER.id, "ghost"]) }],
      // A client publishes its plugins in its active-client entry (its own, or, hostile, another client's).
      [session, { type: "session/activeClientSet", activeClient: { clientId: r() < 0.9 ? clientId : "fam-new", tools: [], customizations: r() < 0.3 ? [] : [plugin(pick(r, ["p1", `${clientId}-p`]), r() < 0.5 ? [`${clientId}-k`] : ["k1"])] } }],
      [session, { type: "session/activeClientRemoved", clientId: r() < 0.9 ? clientId : "fam-new" }],
    );
  }
  const [channel, action] = pick(r, choices);
  // Hostile variants: a field swapped for an odd value, a field dropped, an unknown key.
  const x = r();
  const keys = Object.keys(action).filter((k) => k !== "type");
  if (x < 0.12 && keys.length > 0) action[pick(r, keys)] = structuredClone(pick(r, HOSTILE));
  else if (x < 0.18 && keys.length > 0) delete action[pick(r, keys)];
  else if (x < 0.22) action.extra = 1;
  else if (x < 0.25) action.type = `${String(action.type)}X`;
  return { channel: r() < 0.03 ? "ahp-chat:/unknown" : channel, action };
}

const HELLO: Json = {
  protocolVersion: 6,
  sourceId: "families-fuzz",
  multipleWorkingDirectories: {},
  inputCapabilities: { freeform: true, drafts: true },
  chatCapabilities: { create: true, dispose: true },
  mcpServers: [TOOLS_SERVER],
};

async function snapshots(h: HostHandle, session: string, chats: string[]): Promise<Json> {
  const { c } = await AhpClient.init(h, [], "restart-probe");
  const out: Json = {};
  for (const ch of [session, ...chats]) out[ch] = (await c.request("subscribe", { channel: ch })).result.snapshot.state;
  assert.deepEqual(c.invalid, []);
  c.close();
  return out;
}

test("families fuzz: hostile backend and client actions keep state consistent and durable", { timeout: 600_000 }, async () => {
  const r = prng(SEED ^ 0x2f6e2b1);
  const home = tempHome();
  const logs: string[] = [];
  const h1 = await startHost({ home, log: (m) => logs.push(m) });
  let session = "";
  let chats: string[] = [];
  let before: Json = {};
  try {
    const first = await FakeBackend.session(h1, HELLO);
    const reg = first.reg;
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    session = reg.session as string;
    const { c } = await AhpClient.init(h1, [session], "fam-new");
    const side = `${reg.chat as string}-side`;
    const pending = c.request("createChat", { channel: session, chat: side });
    const cmd = await first.be.next((f) => f.type === "command" && f.command.type === "create_chat", "create_chat");
    first.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await pending).error, undefined);
    chats = [reg.chat as string, side];
    // A pending input request, so in-progress answers have something to name.
    first.be.send({ type: "event", session, event: { type: "user_message", text: "hi" } });
    first.be.send({ type: "event", session, event: { type: "agent_started", turnId: "T1" } });
    first.be.send({ type: "event", session, event: { type: "input_requested", turnId: "T1", request: { id: "q1", message: "?", questions: [{ id: "a", kind: "text", message: "A?" }] } } });
    await first.be.roundTrip();
    const old = await AhpClient.open(h1);
    const oi = await old.request("initialize", { channel: "ahp-root://", protocolVersions: ["0.9.0"], clientId: "fam-old", initialSubscriptions: [] });
    assert.equal(oi.result.protocolVersion, "0.9.0");
    const { c: other } = await AhpClient.init(h1, [], "fam-other");
    const mirrors = [new Mirror(c, session, "1.0 client"), new Mirror(old, session, "0.9 client")];
    for (const m of mirrors) await m.load(chats);
    const clients = [c, old, other];
    const ids = new Map([[c, "fam-new"], [old, "fam-old"], [other, "fam-other"]]);

    const turnIds = (): string[] => c.actions().filter((e) => e.action.type === "chat/turnStarted").map((e) => e.action.turnId as string);
    let be = first.be;
    for (let step = 0; step < STEPS; step++) {
      const where = `seed ${SEED} step ${step}`;
      const y = r();
      if (y < 0.02) {
        // The route goes and comes back: what the backend reported about itself leaves, the rest stays.
        if (process.env.FUZZ_VERBOSE) process.stderr.write(`${step} reconnect\n`);
        be.close();
        await until(() => h1.state.sessions.get(session)?.route === undefined, 5000, `${where}: route loss`);
        be = (await FakeBackend.session(h1, HELLO)).be;
      } else if (y < 0.1) {
        // Turn traffic on the primary chat: a turn starts, ends (in a resumable error, or not), asks a question.
        const event = pick(r, [
          [{ type: "user_message", text: "go" }, { type: "agent_started", turnId: `T${step}` }],
          [{ type: "settled", cancelled: false, error: "boom", resumable: r() < 0.7 }],
          [{ type: "settled", cancelled: false }],
          [{ type: "input_requested", turnId: `T${step}`, request: { id: "q1", message: "?", questions: [{ id: "a", kind: "text", message: "A?" }] } }],
          [{ type: "text_delta", text: "more " }],
        ]);
        if (process.env.FUZZ_VERBOSE) process.stderr.write(`${step} events ${JSON.stringify(event).slice(0, 200)}\n`);
        for (const e of event) be.send({ type: "event", session, event: e });
      } else if (y < 0.55) {
        const { channel, action } = gen(r, "backend", session, chats, turnIds());
        if (process.env.FUZZ_VERBOSE) process.stderr.write(`${step} backend ${channel === session ? "session" : channel} ${JSON.stringify(action).slice(0, 200)}\n`);
        be.send({ type: "event", session, event: { type: "resource_action", channel, action } });
      } else {
        const from = pick(r, clients);
        const { channel, action } = gen(r, "client", session, chats, turnIds(), ids.get(from));
        if (process.env.FUZZ_VERBOSE) process.stderr.write(`${step} client ${clients.indexOf(from)} ${channel === session ? "session" : channel} ${JSON.stringify(action).slice(0, 200)}\n`);
        from.dispatch(channel, action);
        assert.ok((await from.request("ping", {})).result !== undefined, `${where}: the client is answered`);
        await be.roundTrip();
        for (const f of be.frames.splice(0)) {
          assert.notEqual(f.type, "error", `${where}: the host refused nothing of ours: ${JSON.stringify(f)}`);
          if (f.type === "command") be.send({ type: "command_result", commandId: f.commandId, accepted: r() < 0.7, error: "fuzz" });
        }
      }
      await be.roundTrip();
      assert.equal(be.closed, false, `${where}: the backend connection is kept`);
      for (const f of be.frames.splice(0)) {
        if (f.type === "error") assert.ok(typeof f.message === "string" && f.message.length > 0 && f.message.length < 2000, `${where}: refusal has a message`);
        else if (f.type === "command") be.send({ type: "command_result", commandId: f.commandId, accepted: false, error: "late" });
      }
      await be.roundTrip();
      be.frames.length = 0;
      for (const m of mirrors) await m.check(where);
    }
    assert.deepEqual(other.invalid, []);
    // The route leaves: what it reported about itself goes; the durable rest is what a restart restores.
    be.close();
    await until(() => h1.state.sessions.get(session)?.route === undefined, 5000, "route loss");
    for (const m of mirrors) await m.check("after route loss");
    // Active-client entries (and the plugins they publish) belong to connections: they leave with them.
    for (const x of clients) x.close();
    await until(() => (h1.state.sessions.get(session)?.activeClients.length ?? 0) === 0, 5000, "active clients gone");
    before = await snapshots(h1, session, chats);
  } finally {
    await h1.close();
  }
  const bugs = logs.filter((m) => /internal error|bug:/.test(m));
  assert.deepEqual(bugs, [], `seed ${SEED}: the host hit internal errors`);
  const h2 = await startHost({ home, log: () => {} });
  try {
    const after = await snapshots(h2, session, chats);
    if (process.env.FUZZ_DUMP) (await import("node:fs")).writeFileSync(process.env.FUZZ_DUMP, JSON.stringify({ before, after }, null, 1));
    // Known differences, not compared here: a question asked outside a running turn is not
    // checkpointed (so it, and the InputNeeded activity it gives the session, is gone after a
    // restart; only the status flags are compared), and an empty customization list is omitted.
    for (const snap of [before, after]) {
      const s = snap[session] as Json;
      delete s.inputNeeded;
      s.status = (s.status as number) & 96;
      if (Array.isArray(s.customizations) && s.customizations.length === 0) delete s.customizations;
    }
    assert.deepEqual(after, before, `seed ${SEED}: a restart reproduces the session and its chats`);
  } finally {
    await h2.close();
  }
});
