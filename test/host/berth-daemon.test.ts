/**
 * Berth's runtime as the default backend of a real, spawned `berth daemon` (fake provider on loopback), driven by
 * an AHP client: prompt, steer mid-turn, answer a `question`, approve a tool, switch the model, fork a chat, and
 * after a daemon restart read the kept state and paged history. Also: a daemon with no provider configured.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { AhpClient, tempHome, type Json } from "./helpers.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const bin = fileURLToPath(new URL("../../../bin/berth", import.meta.url));

interface Daemon {
  proc: ChildProcess;
  ready: Record<string, string>;
  stderr: string;
}

/** Daemons still running when a test ends (killed by `after`, so a failed assertion never leaves one behind). */
const running = new Set<ChildProcess>();
after(() => {
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
});

function startDaemon(env: NodeJS.ProcessEnv, cwd: string, args: string[] = []): Promise<Daemon> {
  const proc = spawn(process.execPath, [bin, "daemon", "--listen", "127.0.0.1:0", ...args], { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
  running.add(proc);
  proc.once("exit", () => running.delete(proc));
  const d: Daemon = { proc, ready: {}, stderr: "" };
  proc.stderr.on("data", (b: Buffer) => (d.stderr += b.toString()));
  return new Promise((resolve, reject) => {
    let buf = "";
    proc.stdout.on("data", (b: Buffer) => {
      buf += b.toString();
      const nl = buf.indexOf("\n");
      if (nl !== -1 && Object.keys(d.ready).length === 0) {
        d.ready = JSON.parse(buf.slice(0, nl)) as Record<string, string>;
        resolve(d);
      }
    });
    proc.once("exit", (code) => reject(new Error(`daemon exited ${code}: ${d.stderr}`)));
  });
}
const asHandle = (d: Daemon): HostHandle => ({ ahpUrl: d.ready.ahp, httpUrl: d.ready.http, token: d.ready.token, backendSocket: d.ready.backend_socket }) as unknown as HostHandle;
const stop = async (d: Daemon): Promise<number | null> => {
  const done = new Promise<number | null>((r) => (d.proc.exitCode !== null ? r(d.proc.exitCode) : d.proc.once("exit", (c) => r(c))));
  d.proc.kill("SIGTERM");
  return done;
};

function daemonEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, MC_HOME: home, BERTH_HOME: home };
  return env;
}

const user = (text: string): Json => ({ text, origin: { kind: "user" } });
const startTurn = (c: AhpClient, chat: string, turnId: string, text: string): number =>
  c.dispatch(chat, { type: "chat/turnStarted", turnId, startedAt: new Date().toISOString(), message: user(text) });
const ended = (c: AhpClient, turnId: string): Promise<Json> =>
  c.action((e) => ["chat/turnComplete", "chat/turnCancelled", "chat/error"].includes(e.action.type) && e.action.turnId === turnId, `end of ${turnId}`, 15_000);

async function newSession(c: AhpClient, uri: string, cwd: string): Promise<string> {
  const r = await c.request("createSession", { channel: uri, provider: "berth", workingDirectories: [pathToFileURL(cwd).href] });
  assert.equal(r.result, null, JSON.stringify(r.error));
  const snap = (await c.request("subscribe", { channel: uri })).result.snapshot;
  if (snap.state.lifecycle !== "ready") await c.action((e) => e.channel === uri && e.action.type === "session/ready", "session/ready", 10_000);
  const chat: string = snap.state.defaultChat;
  await c.request("subscribe", { channel: chat });
  return chat;
}

test("default berth daemon: an AHP client prompts, steers, answers a question, approves a tool, configures, forks, and pages history after a restart", async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "bh-daemon-"));
  const cwd = mkdtempSync(join(tmpdir(), "bh-daemon-cwd-"));
  writeFileSync(
    join(home, "settings.json"),
    JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }, { id: "fake-model-2" }] } }, provider: "fake", model: "fake-model" }),
  );
  const env = daemonEnv(home);
  const session = "ahp-session:/e2e";
  let chat = "";
  try {
    const d = await startDaemon(env, cwd); // no flag: the runtime is registered by default
    const h = asHandle(d);
    const { c, result } = await AhpClient.init(h, ["ahp-root://"]);
    assert.deepEqual(result.snapshots[0].state.agents.map((a: Json) => a.provider), ["berth"]);
    chat = await newSession(c, session, cwd);

    // 1. A prompt streams back.
    startTurn(c, chat, "t1", "hello daemon");
    assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete");

    // 2. A turn asks a question (the `question` tool); while it waits the client steers; the answer and the
    //    steering reach the model at the next step; then a mutating tool asks for confirmation and is approved.
    fake.script([
      { steps: [{ toolCall: { id: "q1", name: "question", arguments: { question: "Which color?", options: ["red", "blue"] } } }] },
      { steps: [{ toolCall: { id: "w1", name: "write", arguments: { path: "color.txt", content: "blue" } } }] },
      { steps: [{ text: "all done" }] },
    ]);
    const before = fake.requests.length;
    startTurn(c, chat, "t2", "pick a color");
    const asked = await c.action((e) => e.channel === chat && e.action.type === "chat/inputRequested", "question", 15_000);
    const req = asked.action.request;
    assert.equal(req.questions[0].message, "Which color?");
    assert.deepEqual(req.questions[0].options.map((o: Json) => o.label), ["red", "blue"]);
    await c.action((e) => e.channel === session && e.action.type === "session/inputNeededSet");
    c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("keep it short") });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.origin?.clientId === "c1" && e.rejectionReason === undefined, "steering accepted");
    const blue = req.questions[0].options[1].id;
    c.dispatch(chat, { type: "chat/inputCompleted", requestId: req.id, response: "accept", answers: { [req.questions[0].id]: { state: "submitted", value: { kind: "selected", value: blue } } } });
    const completed = await c.action((e) => e.action.type === "chat/inputCompleted" && e.action.requestId === req.id, "answer reduced", 15_000);
    assert.equal(completed.origin?.clientId, "c1");
    await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.action.id === "s1", "steering consumed", 15_000);
    const ready = await c.action((e) => e.action.type === "chat/toolCallReady" && e.action.turnId === "t2" && e.action.confirmed === undefined, "confirmation", 15_000);
    c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId: "t2", toolCallId: ready.action.toolCallId, approved: true, confirmed: "user-action" });
    assert.equal((await ended(c, "t2")).action.type, "chat/turnComplete");
    assert.equal(readFileSync(join(cwd, "color.txt"), "utf8"), "blue");
    const second = JSON.stringify(fake.requests[before + 1]!.json);
    assert.match(second, /The user chose option 2: blue/);
    assert.match(second, /keep it short/, "the steering message reached the model at the step boundary");

    // 3. The model switches for the next turn (and the reasoning level).
    c.dispatch(session, { type: "session/configChanged", config: { model: { provider: "fake", id: "fake-model-2" }, thinkingLevel: "high" } });
    await c.action((e) => e.channel === session && e.action.type === "session/configChanged" && e.origin?.clientId === "c1" && e.rejectionReason === undefined, "config echo");
    const n3 = fake.requests.length;
    startTurn(c, chat, "t3", "after the switch");
    assert.equal((await ended(c, "t3")).action.type, "chat/turnComplete");
    assert.equal((fake.requests[n3]!.json as Json).model, "fake-model-2");

    // 4. Fork the chat after t1: the fork's model context is t1 only.
    const fork = "ahp-chat:/fork-e2e";
    const fr = await c.request("createChat", { channel: session, chat: fork, title: "Fork", source: { kind: "fork", chat, turnId: "t1" } });
    assert.equal(fr.result, null, JSON.stringify(fr.error));
    await c.request("subscribe", { channel: fork });
    const n4 = fake.requests.length;
    startTurn(c, fork, "f1", "in the fork");
    assert.equal((await ended(c, "f1")).action.type, "chat/turnComplete");
    const forkBody = JSON.stringify(fake.requests[n4]!.json);
    assert.match(forkBody, /hello daemon/);
    assert.doesNotMatch(forkBody, /pick a color/);
    assert.equal((fake.requests[n4]!.json as Json).model, "fake-model-2", "the session's model applies to every chat");
    assert.deepEqual(c.invalid, []);
    c.close();
    assert.equal(await stop(d), 0);

    // Meanwhile another door wrote a long session into the same Berth store.
    const store = new SessionStore({ home });
    const other = await store.create(cwd);
    for (let i = 0; i < 25; i++) {
      await other.writer.append({ kind: "user", turn_id: `o${i}`, text: i === 0 ? "long transcript" : `question ${i}` });
      await other.writer.append({ kind: "terminal", turn_id: `o${i}`, status: "completed", assistant_text: `answer ${i}` });
    }
    await other.release();

    // 5. Restart: the session, its chats and its model are kept; the long session pages its history.
    const d2 = await startDaemon(env, cwd);
    const h2 = asHandle(d2);
    const { c: c2 } = await AhpClient.init(h2, ["ahp-root://"]);
    const snap = (await c2.request("subscribe", { channel: session })).result.snapshot.state;
    assert.deepEqual(snap.chats.map((x: Json) => x.resource).sort(), [chat, fork].sort());
    const main = (await c2.request("subscribe", { channel: chat })).result.snapshot.state;
    assert.deepEqual(main.turns.map((t: Json) => t.id), ["t1", "t2", "t3"]);
    const n5 = fake.requests.length;
    startTurn(c2, fork, "f2", "fork again");
    await c2.request("subscribe", { channel: fork });
    assert.equal((await ended(c2, "f2")).action.type, "chat/turnComplete");
    const body5 = fake.requests[n5]!.json as Json;
    assert.equal(body5.model, "fake-model-2", "the model survived the restart");
    assert.match(JSON.stringify(body5), /in the fork/);

    // Store sessions register after the ready line (each reads its newest history first).
    let long: Json | undefined;
    for (let i = 0; long === undefined; i++) {
      assert.ok(i < 2000, "the store session is listed");
      const list = (await c2.request("listSessions", {})).result.items as Json[];
      long = list.find((x) => x.title === "long transcript");
      if (long === undefined) await new Promise((r) => setTimeout(r, 5));
    }
    const longState = (await c2.request("subscribe", { channel: long.resource })).result.snapshot.state;
    const longChat: string = longState.defaultChat;
    const page1 = (await c2.request("subscribe", { channel: longChat })).result.snapshot.state;
    assert.equal(page1.turns.length, 20);
    assert.equal(page1.turns[0].id, "o5");
    assert.equal(page1.turns[19].responseParts[0].content, "answer 24");
    assert.equal(typeof page1.turnsNextCursor, "string");
    const fetched = await c2.request("fetchTurns", { channel: longChat, cursor: page1.turnsNextCursor });
    assert.deepEqual(fetched.result, {}, JSON.stringify(fetched.error));
    const loaded = await c2.action((e) => e.channel === longChat && e.action.type === "chat/turnsLoaded", "turns loaded", 10_000);
    assert.deepEqual(loaded.action.turns.map((t: Json) => t.id), ["o0", "o1", "o2", "o3", "o4"]);
    assert.equal(loaded.action.turnsNextCursor, undefined);
    const all = (await c2.request("subscribe", { channel: longChat })).result.snapshot.state;
    assert.equal(all.turns.length, 25);
    assert.equal(all.turnsNextCursor, undefined);
    assert.deepEqual(c2.invalid, []);
    c2.close();
    assert.equal(await stop(d2), 0);
  } finally {
    await fake.close();
  }
});

test("a daemon with no model provider configured starts, serves, and fails turns naming the cause; --no-berth-runtime registers nothing", async () => {
  const home = tempHome();
  const cwd = mkdtempSync(join(tmpdir(), "bh-daemon-cwd-"));
  const env = daemonEnv(home);
  const d = await startDaemon(env, cwd);
  let message = "";
  {
    const h = asHandle(d);
    const { c, result } = await AhpClient.init(h, ["ahp-root://"]);
    assert.deepEqual(result.snapshots[0].state.agents.map((a: Json) => a.provider), ["berth"]);
    const chat = await newSession(c, "ahp-session:/noprov", cwd);
    startTurn(c, chat, "n1", "anyone there?");
    const end = await ended(c, "n1");
    assert.equal(end.action.type, "chat/error");
    message = JSON.stringify(end.action);
    c.close();
    assert.equal(await stop(d), 0);
  }
  assert.match(message, /turn failed: the provider credential is missing or was rejected\b.*; sign in again or set the API key/);

  const off = await startDaemon(daemonEnv(tempHome()), cwd, ["--no-berth-runtime"]);
  const { c: c2, result: r2 } = await AhpClient.init(asHandle(off), ["ahp-root://"]);
  assert.deepEqual(r2.snapshots[0].state.agents, []);
  c2.close();
  assert.equal(await stop(off), 0);
  const on = await startDaemon(daemonEnv(tempHome()), cwd, ["--berth-runtime"]);
  const { c: c3, result: r3 } = await AhpClient.init(asHandle(on), ["ahp-root://"]);
  assert.deepEqual(r3.snapshots[0].state.agents.map((a: Json) => a.provider), ["berth"]);
  c3.close();
  assert.equal(await stop(on), 0);
});

test("settings' approval_policy applies to the daemon's own sessions: read at each prompt, a repository may only tighten it", async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "bh-daemon-"));
  const launch = mkdtempSync(join(tmpdir(), "bh-daemon-cwd-"));
  const repo = mkdtempSync(join(tmpdir(), "bh-daemon-repo-"));
  const settings = (policy: string): void =>
    writeFileSync(
      join(home, "settings.json"),
      JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model", approval_policy: policy }),
    );
  /** Runs a turn calling `tool`; whether the client was asked (then it approves), and how the turn ended. */
  const toolTurn = async (c: AhpClient, chat: string, turnId: string, tool: string, args: Json): Promise<{ asked: boolean; end: string }> => {
    fake.script([{ steps: [{ toolCall: { id: `call_${turnId}`, name: tool, arguments: args } }] }, { steps: [{ text: "ok" }] }]);
    startTurn(c, chat, turnId, `run ${tool}`);
    const ready = await c.action((e) => e.channel === chat && e.action.type === "chat/toolCallReady" && e.action.turnId === turnId, `${tool} ready`, 15_000);
    const asked = ready.action.confirmed === undefined;
    if (asked) c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId, toolCallId: ready.action.toolCallId, approved: true, confirmed: "user-action" });
    return { asked, end: (await ended(c, turnId)).action.type };
  };
  try {
    settings("always");
    const d = await startDaemon(daemonEnv(home), launch);
    const { c } = await AhpClient.init(asHandle(d), ["ahp-root://"]);
    const chat = await newSession(c, "ahp-session:/policy", launch);
    // The global "always": even a read-only tool asks.
    assert.deepEqual(await toolTurn(c, chat, "p1", "ls", {}), { asked: true, end: "chat/turnComplete" });
    // The global setting changed while the daemon runs: "never" applies from the next prompt on.
    settings("never");
    assert.deepEqual(await toolTurn(c, chat, "p2", "bash", { command: "echo unasked > unasked.txt" }), { asked: false, end: "chat/turnComplete" });
    assert.equal(readFileSync(join(launch, "unasked.txt"), "utf8"), "unasked\n");
    // A session in a repository whose .berth/settings.json says "always": asked despite the global "never".
    mkdirSync(join(repo, ".berth"), { mode: 0o700 });
    writeFileSync(join(repo, ".berth", "settings.json"), JSON.stringify({ approval_policy: "always" }), { mode: 0o600 });
    const repoChat = await newSession(c, "ahp-session:/policy-repo", repo);
    assert.deepEqual(await toolTurn(c, repoChat, "p3", "ls", {}), { asked: true, end: "chat/turnComplete" });
    // The global "on-risk" and the repository saying "never": bash still asks, and the daemon says why, once.
    settings("on-risk");
    writeFileSync(join(repo, ".berth", "settings.json"), JSON.stringify({ approval_policy: "never" }), { mode: 0o600 });
    assert.deepEqual(await toolTurn(c, repoChat, "p4", "bash", { command: "echo asked" }), { asked: true, end: "chat/turnComplete" });
    assert.deepEqual(await toolTurn(c, repoChat, "p5", "bash", { command: "echo asked again" }), { asked: true, end: "chat/turnComplete" });
    assert.deepEqual(c.invalid, []);
    c.close();
    assert.equal(await stop(d), 0);
    const note = `ignoring approval_policy "never" in ${join(repo, ".berth", "settings.json")}: a project's settings may only make approvals stricter (using "on-risk")`;
    assert.equal(d.stderr.split(note).length - 1, 1, d.stderr);
  } finally {
    await fake.close();
  }
});
