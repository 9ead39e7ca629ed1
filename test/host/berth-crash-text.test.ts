/**
 * A real `berth daemon` killed by SIGKILL after Berth's runtime durably recorded a streaming answer's text and before
 * the host checkpointed it (the host checkpoints an active turn at most once a second; the runtime writes a streaming
 * answer within 250 ms). After the restart the AHP client finds the turn with the runtime's durable partial text, once,
 * ended with the continuity gap (interrupted, not a success), its message not resent; a second restart changes nothing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { AhpClient, tempHome, until, type Json } from "./helpers.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { OBSERVATION_GAP_MESSAGE } from "../../src/protocols/host/managed-schema.js";
import { berthTurnStarted, daemonStarter, exited } from "./daemon-proc.js";

const startDaemon = daemonStarter();

/** Whether some Berth session file (the runtime's durable store) holds `text`. */
function runtimeHolds(home: string, text: string): boolean {
  const dir = join(home, "sessions");
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".jsonl"));
  } catch {
    return false;
  }
  return names.some((n) => readFileSync(join(dir, n), "utf8").includes(text));
}

/** The host's checkpoint of the chat's active turn, as the next daemon reads it. */
function checkpointText(home: string, chat: string): string {
  const db = new Database(join(home, "host", "host.db"), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT extra FROM chats WHERE uri = ?").get(chat) as { extra: string } | undefined)?.extra ?? "";
  } finally {
    db.close();
  }
}

/** The chat's state once turn `id` has ended (the restored turn ends when Berth's runtime registers again). */
async function endedState(c: AhpClient, chat: string, id: string): Promise<Json> {
  for (let i = 0; ; i++) {
    assert.ok(i < 2000, `turn ${id} ends once Berth's runtime registers again`);
    const state = (await c.request("subscribe", { channel: chat })).result.snapshot.state as Json;
    if (state.activeTurn === undefined && (state.turns as Json[]).some((t) => t.id === id)) return state;
    await new Promise((res) => setTimeout(res, 10));
  }
}

const markdown = (t: Json): string => (t.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content as string).join("");

interface CrashRun {
  home: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  chat: string;
  /** The fake provider's requests before this run's. */
  requestsFrom: number;
}

/**
 * One crash: a daemon whose turn streamed `first`, checkpointed, then `second`, which the runtime's session file holds,
 * killed by SIGKILL. The run's home, working directory, environment and chat; null when the host had checkpointed
 * `second` too before the kill landed (the scenario did not happen).
 */
async function crashAttempt(fake: FakeProvider, first: string, second: string): Promise<CrashRun | null> {
  const requestsFrom = fake.requests.length;
  const home = tempHome();
  const cwd = mkdtempSync(join(tmpdir(), "bh-crash-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, MC_HOME: home, BERTH_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => (release = r));
  fake.script([{ steps: [{ text: first }, { hold: held }, { text: second }, { waitForAbort: true }] }]);

  const d1 = await startDaemon(env, cwd);
  const { c } = await AhpClient.init(d1.h, ["ahp-root://"]);
  const session = "ahp-session:/crash-text";
  const chat = await berthTurnStarted(c, session, cwd, "tell me");
  // The host's checkpoint holds the head; then the tail streams, and the kill lands once the runtime's session
  // file holds it: the host's next checkpoint is a second after the tail's first change at the earliest.
  await until(() => checkpointText(home, chat).includes(first), 15_000, "the host checkpointed the head");
  release();
  await c.action((e) => e.channel === chat && JSON.stringify(e.action).includes(second), "the tail reached the client", 15_000);
  await until(() => runtimeHolds(home, second), 15_000, "the runtime's session file holds the tail");
  d1.proc.kill("SIGKILL");
  await exited(d1.proc);
  c.close();
  // The scenario: the host's checkpoint lacks the tail, the runtime's durable record has it.
  const cp = checkpointText(home, chat);
  assert.ok(cp.includes(first), "the host's checkpoint holds the head");
  return cp.includes(second) ? null : { home, cwd, env, chat, requestsFrom };
}

test("berth daemon killed after the runtime recorded text the host had not checkpointed: the restored turn has it", async () => {
  const fake = await startFakeProvider();
  try {
    // The kill must land after the runtime's durable write of the tail and before the host's next checkpoint (a
    // second after the tail's first change at the earliest). On a machine loaded enough to spend that second between
    // the release and the kill, the attempt proves nothing: it is made again, from a new home, at most three times.
    const first = "checkpointed head of the answer. ";
    const second = "tail the runtime recorded before the crash";
    let run: CrashRun | null = null;
    for (let attempt = 1; run === null; attempt++) {
      run = await crashAttempt(fake, first, second);
      if (run === null) assert.ok(attempt < 3, "three attempts in a row killed the daemon only after the host checkpointed the tail");
    }
    const { cwd, env, chat, requestsFrom } = run;
    const d2 = await startDaemon(env, cwd);
    const { c: c2 } = await AhpClient.init(d2.h, ["ahp-root://"]);
    const state = await endedState(c2, chat, "t1");
    const turns = (state.turns as Json[]).filter((t) => t.id === "t1");
    assert.equal(turns.length, 1);
    const t1 = turns[0]!;
    assert.equal(t1.state, "error", "interrupted, never a success");
    assert.equal(markdown(t1), first + second, "the runtime's durable partial text, once");
    const err = (t1.responseParts as Json[]).find((p) => p.kind === "error")!;
    assert.equal(err.error.errorType, "source_observation_gap");
    assert.equal(err.error.message, OBSERVATION_GAP_MESSAGE);
    assert.equal(fake.requests.slice(requestsFrom).filter((q) => q.api === "openai-chat").length, 1, "the message was not resent");
    assert.deepEqual(c2.invalid, []);
    c2.close();
    d2.proc.kill("SIGKILL");
    await exited(d2.proc);

    // A second restart: the same turn, once, with the same text.
    const d3 = await startDaemon(env, cwd);
    const { c: c3 } = await AhpClient.init(d3.h, ["ahp-root://"]);
    const again = await endedState(c3, chat, "t1");
    const turns3 = (again.turns as Json[]).filter((t) => t.id === "t1");
    assert.equal(turns3.length, 1);
    assert.equal(markdown(turns3[0]!), first + second);
    assert.equal((turns3[0]!.responseParts as Json[]).filter((p) => p.kind === "error").length, 1);
    assert.equal((again.turns as Json[]).length, 1, "no turn was added");
    c3.close();
    d3.proc.kill("SIGTERM");
    await exited(d3.proc);
  } finally {
    await fake.close();
  }
});
