/**
 * Text with a lone surrogate (a `\uD800`–`\uDFFF` escape without its pair, which JSON parsers let through) entering a
 * turn from any side — the prompt, the model's answer, a tool's result, a steering message — becomes Unicode text
 * (each lone surrogate U+FFFD) where it enters: the turn completes, the doors and the next request get the replaced
 * text, and the session file keeps exactly that. The session store refuses ill-formed text, so before this a turn
 * carrying one failed with "the session could not be written to disk". Real pieces: the session hub and agent, the
 * store, the loopback fake provider, the stdio MCP fixture.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { SessionPaths } from "../../src/store/sessions/paths.js";
import { collectHubEvents } from "../helpers/hub-events.js";
import { SessionHub, type SessionEvent, type SessionRuntime } from "../../src/runtime/session/index.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));
const LONE_HIGH = "\ud800";
const LONE_LOW = "\udc00";
const FFFD = "\ufffd";

interface Rig {
  fake: FakeProvider;
  hub: SessionHub;
  events: SessionEvent[];
  home: string;
  turn(rt: SessionRuntime, prompt: string): Promise<SessionEvent>;
  next: (pred: (e: SessionEvent) => boolean, from?: number) => Promise<SessionEvent>;
}

async function withRig(fn: (r: Rig) => Promise<void>): Promise<void> {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "wf-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "wf-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  const env = { PATH: process.env.PATH, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const manager = new SessionManager(new SessionStore({ home }));
  const hub = new SessionHub({ manager, runner: new Agent({ home, cwd, env }), defaults: { cwd, approval: "never" } });
  const { events, next } = collectHubEvents(hub);
  const ended = (e: SessionEvent): boolean => e.type === "turn_completed" || e.type === "turn_failed" || e.type === "turn_cancelled";
  const turn = async (rt: SessionRuntime, prompt: string): Promise<SessionEvent> => {
    const from = events.length;
    const r = await rt.startTurn(prompt);
    assert.ok(r.ok, JSON.stringify(r));
    return next((e) => e.sessionId === rt.id && ended(e), from);
  };
  try {
    await fn({ fake, hub, events, home, turn, next });
  } finally {
    await hub.close();
    await manager.drain();
    await fake.close();
  }
}

type Rec = { kind: string; text?: string; content?: string; assistant_text?: string };
const records = (home: string, id: string): Rec[] =>
  readFileSync(new SessionPaths(home).data(id), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Rec);

/** Every string of a request body the fake provider received (decoded). */
function bodyStrings(v: unknown, out: string[] = []): string[] {
  if (typeof v === "string") out.push(v);
  else if (Array.isArray(v)) for (const x of v) bodyStrings(x, out);
  else if (typeof v === "object" && v !== null) for (const x of Object.values(v)) bodyStrings(x, out);
  return out;
}
const wellFormed = (s: string): boolean => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);

void test("a prompt with lone surrogates runs: the model, the turn's events and the session file get U+FFFD", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({});
    const from = r.events.length;
    const end = await r.turn(rt, `x${LONE_HIGH}y${LONE_LOW}z 😀`);
    assert.equal(end.type, "turn_completed", JSON.stringify(end));
    const started = r.events.slice(from).find((e) => e.type === "turn_started");
    assert.equal(started?.type === "turn_started" ? started.prompt : null, `x${FFFD}y${FFFD}z 😀`);
    const sent = bodyStrings(r.fake.requests.at(-1)!.json);
    assert.ok(sent.includes(`x${FFFD}y${FFFD}z 😀`), "the request carries the replaced prompt");
    assert.ok(sent.every(wellFormed), "nothing ill-formed reaches the provider");
    const user = records(r.home, rt.id).filter((x) => x.kind === "user");
    assert.deepEqual(user.map((x) => x.text), [`x${FFFD}y${FFFD}z 😀`]);
    // Queued prompts too: the queue entry the doors echo holds the replaced text.
    rt.pause(true);
    const q = rt.submit(`q${LONE_LOW}`);
    assert.equal(q.prompt, `q${FFFD}`);
  });
});

void test("an answer streamed with a lone surrogate completes: deltas, terminal and records hold U+FFFD", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({});
    r.fake.script([{ steps: [{ text: `a${LONE_HIGH}b and the rest`, chunks: 3 }] }]);
    const from = r.events.length;
    const end = await r.turn(rt, "answer");
    assert.equal(end.type, "turn_completed", JSON.stringify(end));
    const deltas = r.events.slice(from).flatMap((e) => (e.type === "assistant_delta" ? [e.text] : []));
    assert.equal(deltas.join(""), `a${FFFD}b and the rest`);
    const recs = records(r.home, rt.id);
    assert.equal(recs.filter((x) => x.kind === "assistant").map((x) => x.text).join(""), `a${FFFD}b and the rest`);
    assert.equal(recs.find((x) => x.kind === "terminal")?.assistant_text, `a${FFFD}b and the rest`);
    // The next turn's request carries the stored answer as it was kept.
    assert.equal((await r.turn(rt, "again")).type, "turn_completed");
    assert.ok(bodyStrings(r.fake.requests.at(-1)!.json).includes(`a${FFFD}b and the rest`));
  });
});

void test("a pair split across two deltas arrives whole; a high surrogate that ends the answer becomes U+FFFD", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({});
    // Cut by UTF-16 code units: "a", "\ud83d", "\ude00", "b", "\ud83d", "\ude01", "c", "\ud83d".
    r.fake.script([{ steps: [{ text: "a😀b😁c\ud83d", chunks: 8 }] }]);
    const from = r.events.length;
    const end = await r.turn(rt, "emoji");
    assert.equal(end.type, "turn_completed", JSON.stringify(end));
    const deltas = r.events.slice(from).flatMap((e) => (e.type === "assistant_delta" ? [e.text] : []));
    assert.ok(deltas.every(wellFormed), JSON.stringify(deltas));
    assert.equal(deltas.join(""), `a😀b😁c${FFFD}`);
    const recs = records(r.home, rt.id);
    assert.equal(recs.find((x) => x.kind === "terminal")?.assistant_text, `a😀b😁c${FFFD}`);
  });
});

void test("an MCP tool's result with a lone surrogate: the tool event, the next request and the record get U+FFFD", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({ mcpServers: { fx: { command: process.execPath, args: [FIXTURE], env: {} } } });
    r.fake.script([{ steps: [{ toolCall: { id: "c1", name: "mcp__fx__lone", arguments: {} } }] }, { steps: [{ text: "done" }] }]);
    const from = r.events.length;
    const end = await r.turn(rt, "answer oddly");
    assert.equal(end.type, "turn_completed", JSON.stringify(end));
    const done = r.events.slice(from).find((e) => e.type === "tool_completed");
    assert.equal(done?.type === "tool_completed" ? done.output : null, `p${FFFD}q`);
    assert.ok(bodyStrings(r.fake.requests.at(-1)!.json).includes(`p${FFFD}q`), "the tool message the model gets");
    assert.deepEqual(records(r.home, rt.id).filter((x) => x.kind === "tool_result").map((x) => x.content), [`p${FFFD}q`]);
  });
});

void test("a tool call whose ID, name or arguments hold lone surrogates: the tool gets U+FFFD, the call is stored", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({ mcpServers: { fx: { command: process.execPath, args: [FIXTURE], env: {} } } });
    r.fake.script([
      { steps: [{ toolCall: { id: `c${LONE_HIGH}1`, name: "mcp__fx__echo", arguments: { text: `p${LONE_LOW}q`, [`k${LONE_HIGH}`]: [`v${LONE_LOW}`] } } }] },
      { steps: [{ toolCall: { id: "c2", name: `mcp__fx__echo${LONE_LOW}`, arguments: { text: "x" } } }] },
      { steps: [{ text: "done" }] },
    ]);
    const from = r.events.length;
    const end = await r.turn(rt, "call it");
    assert.equal(end.type, "turn_completed", JSON.stringify(end));
    const proposed = r.events.slice(from).flatMap((e) => (e.type === "tool_proposed" ? [e] : []));
    assert.deepEqual(proposed[0]?.arguments, { text: `p${FFFD}q`, [`k${FFFD}`]: [`v${FFFD}`] });
    assert.equal(proposed[0]?.callId, `c${FFFD}1`);
    assert.equal(proposed[1]?.name, `mcp__fx__echo${FFFD}`);
    const done = r.events.slice(from).flatMap((e) => (e.type === "tool_completed" ? [e.output] : []));
    assert.equal(done[0], `echo: p${FFFD}q`, "the tool ran with the replaced arguments");
    assert.match(done[1] ?? "", /unknown tool/);
    const calls = records(r.home, rt.id).filter((x) => x.kind === "tool_call") as Array<Rec & { call_id: string; name: string }>;
    assert.deepEqual(calls.map((c) => [c.call_id, c.name]), [[`c${FFFD}1`, "mcp__fx__echo"], ["c2", `mcp__fx__echo${FFFD}`]]);
  });
});

void test("a steering message with a lone surrogate is kept and sent as U+FFFD", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({ mcpServers: { fx: { command: process.execPath, args: [FIXTURE], env: {} } } });
    let steered!: () => void;
    const hold = new Promise<void>((resolve) => (steered = resolve));
    r.fake.script([{ steps: [{ toolCall: { id: "c1", name: "mcp__fx__echo", arguments: { text: "hi" } } }] }, { steps: [{ text: "seen" }] }]);
    const from = r.events.length;
    // Steered while the turn's tool call is being reported: the message joins at the next step boundary.
    const off = r.hub.subscribe((e) => {
      if (e.sessionId === rt.id && e.type === "tool_started") {
        assert.equal(rt.steer(`s${LONE_HIGH}t`), true);
        steered();
      }
    });
    const r1 = await rt.startTurn("steer me");
    assert.ok(r1.ok);
    await hold;
    off();
    const end = await r.next((e) => e.sessionId === rt.id && (e.type === "turn_completed" || e.type === "turn_failed" || e.type === "turn_cancelled"), from);
    assert.equal(end.type, "turn_completed", JSON.stringify(end));
    assert.ok(bodyStrings(r.fake.requests.at(-1)!.json).includes(`s${FFFD}t`), "the steering message the model gets");
    assert.ok(records(r.home, rt.id).some((x) => x.kind === "user" && x.text === `s${FFFD}t`));
  });
});
