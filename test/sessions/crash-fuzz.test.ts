/**
 * Seeded kill points (docs/sessions.md, "Crash and resume"): a `berth stdio` or `berth service` is killed with
 * SIGKILL at a point of a turn chosen by the seed — right after `turn.start` was sent (the user record possibly not
 * durable yet), after N streamed deltas, once a partial segment is on disk, while an approval is pending (stdio),
 * while a tool runs (service), right after the terminal event — against a loopback provider streaming slowly. A fresh
 * `berth service` then lists, opens and replays the session and runs a turn on it. Invariants: the session is listed;
 * every record parses, seqs increase, one terminal per turn; a turn whose deltas the client saw has its user record;
 * no turn is left open; a reported completion is replayed completed with its text, anything else is `failed` with a
 * prefix of the answer (at least what was seen on disk before the kill); the session takes a new turn.
 * `CRASH_FUZZ_COUNT` (default 3) and `CRASH_FUZZ_SEED` run more or other cases.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { prng } from "../helpers/prng.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { startRig, spawnStdio, type Rig } from "../scv/client.js";
import type { FakeTurn } from "../fakes/fake-provider.js";
import { assertSoundFile, closeObserver, conversation, fileRecords, listed, observer, replayAll, serviceTurn, until, type Msg } from "./crash-rig.js";

const COUNT = Number(process.env.CRASH_FUZZ_COUNT ?? 3);
const SEED = Number(process.env.CRASH_FUZZ_SEED ?? 20261204);
const ANSWER = Array.from({ length: 24 }, (_, i) => `w${i} `).join("");
const POINTS = ["sent", "deltas", "durable", "tool", "terminal"] as const;
type Point = (typeof POINTS)[number];

/** The turn the door runs: the answer streamed slowly, then (for `tool`) a call that waits. */
function scripted(point: Point, door: "stdio" | "service"): FakeTurn {
  const text = { text: ANSWER, chunks: 24 };
  if (point !== "tool") return { steps: [text], chunkDelayMs: 8 };
  // stdio asks for approval of `bash` (on-risk policy) and waits there; the service runs it (killed around it).
  return { steps: [text, { toolCall: { name: "bash", arguments: { command: door === "stdio" ? "true" : "echo ran" } } }], chunkDelayMs: 8 };
}

interface Door {
  sessionId: string;
  start(prompt: string): void;
  deltas(): string;
  completed(): string | null;
  toolWaiting(): boolean;
  kill(): Promise<void>;
}

async function stdioDoor(rig: Rig): Promise<Door> {
  const p = spawnStdio(rig.env);
  const sessionId = (await p.client.open()).session_id as string;
  const frames = p.client.frames;
  return {
    sessionId,
    start: (prompt) => void p.client.request({ type: "turn.start", session_id: sessionId, prompt }),
    deltas: () => frames.filter((f) => f.type === "assistant.delta").map((f) => String(f.content ?? "")).join(""),
    completed: () => (frames.some((f) => f.type === "turn.completed") ? ANSWER : null),
    toolWaiting: () => frames.some((f) => f.type === "approval.requested"),
    kill: async () => {
      p.child.kill("SIGKILL");
      await p.exited;
    },
  };
}

async function serviceDoor(rig: Rig): Promise<Door> {
  const svc = new ServiceProcess({ home: rig.home });
  await svc.initialize();
  const sessionId = (await svc.request("session.create", {})).payload.session_id as string;
  const events = (): Msg[] => svc.lines.map((l) => JSON.parse(l) as Msg).filter((m) => m.kind === "event");
  return {
    sessionId,
    start: (prompt) => svc.send({ protocol_version: 1, kind: "request", request_id: "door-turn", session_id: sessionId, method: "turn.start", payload: { prompt } }),
    deltas: () => events().filter((e) => e.event === "turn.assistant_delta").map((e) => String(e.payload?.delta ?? e.payload?.text ?? "")).join(""),
    completed: () => {
      const t = events().find((e) => e.event === "turn.terminal");
      return t?.payload?.status === "completed" ? (t.payload.assistant_text as string) : null;
    },
    toolWaiting: () => fileRecords(rig.home, sessionId).records.some((r) => r.kind === "tool_call"),
    kill: async () => {
      svc.kill("SIGKILL");
      await svc.exited;
    },
  };
}

async function oneCase(rig: Rig, seed: number): Promise<void> {
  const rnd = prng(seed);
  const door = rnd() < 0.5 ? ("stdio" as const) : ("service" as const);
  const point = POINTS[Math.floor(rnd() * POINTS.length)]!;
  const n = 1 + Math.floor(rnd() * 20);
  const label = `seed ${seed}: ${door} killed at ${point}${point === "deltas" ? ` ${n}` : ""}`;
  rig.fake.unscript();
  rig.fake.script([scripted(point, door)]);
  const d = door === "stdio" ? await stdioDoor(rig) : await serviceDoor(rig);
  const id = d.sessionId;
  d.start("the question");
  let onDisk = "";
  if (point === "deltas") await until(`${label}: deltas`, () => d.deltas().length >= n * 3 || d.completed() !== null);
  if (point === "durable") {
    await until(`${label}: a segment on disk`, () => fileRecords(rig.home, id).records.some((r) => r.kind === "assistant"));
    onDisk = fileRecords(rig.home, id).records.filter((r) => r.kind === "assistant").map((r) => r.text as string).join("");
  }
  if (point === "tool") await until(`${label}: the tool waiting`, () => d.toolWaiting());
  if (point === "terminal") await until(`${label}: the terminal event`, () => d.completed() !== null);
  const seen = d.deltas();
  const completed = d.completed();
  await d.kill();
  rig.fake.unscript(); // a request the door never made must not take the scripted answer

  const svc = await observer(rig);
  try {
    assert.ok(await listed(svc, id), `${label}: listed`);
    assert.equal((await svc.request("session.open", {}, { session_id: id })).error, null, `${label}: the dead door's locks do not block`);
    const conv = conversation((await replayAll(svc, id)).items);
    if (seen !== "") assert.equal(conv[0], "user:the question", `${label}: the user record of a streamed turn`);
    if (conv.length > 0) {
      assert.equal(conv[0], "user:the question", label);
      const last = conv.at(-1)!;
      assert.ok(last === "terminal:failed" || last === "terminal:completed", `${label}: the turn is settled, not open: ${JSON.stringify(conv)}`);
      const text = conv.length === 3 ? conv[1]!.replace(/^assistant:/, "") : "";
      if (completed !== null) assert.deepEqual(conv, ["user:the question", `assistant:${completed}`, "terminal:completed"], `${label}: a reported completion`);
      else if (last === "terminal:failed") {
        assert.ok(ANSWER.startsWith(text), `${label}: the partial answer is a prefix of the answer: ${JSON.stringify(text)}`);
        assert.ok(text.startsWith(onDisk), `${label}: what was on disk before the kill is kept`);
      }
    }
    assert.equal((await serviceTurn(svc, id, "after")).payload.status, "completed", `${label}: a new turn`);
    const after = conversation((await replayAll(svc, id)).items);
    assert.deepEqual(after.slice(-3), ["user:after", "assistant:echo: after", "terminal:completed"], label);
  } finally {
    await closeObserver(svc);
  }
  assertSoundFile(rig.home, id);
}

test(`seeded SIGKILL points over berth stdio and berth service (${COUNT} cases, seed ${SEED})`, { timeout: 60_000 + COUNT * 20_000 }, async () => {
  const rig = await startRig();
  try {
    for (let i = 0; i < COUNT; i++) await oneCase(rig, SEED + i);
  } finally {
    await rig.fake.close();
  }
});
