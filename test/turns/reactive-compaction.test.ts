/**
 * Reactive compaction through the spawned service: a request the provider refuses as over the model's window is
 * compacted and sent again; what the client sees (activity, terminal, text), replay, a fresh process's replay and
 * the next turn's context.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { FakeTurn } from "../fakes/fake-provider.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { startRig, startTurn, waitTerminal, type Msg, type TurnRig } from "./helpers.js";

const OVERFLOW: FakeTurn = {
  status: 400,
  body: JSON.stringify({ error: { message: "This model's maximum context length is 8192 tokens.", type: "invalid_request_error", code: "context_length_exceeded" } }),
};

const terminalOf = (events: Msg[]): Msg => events.find((e) => e.event === "turn.terminal")!.payload;
const activities = (events: Msg[]): Msg[] => events.filter((e) => e.event === "turn.activity").map((e) => e.payload.activity);
const shape = (items: Msg[]): unknown[] => items.map((e) => [e.kind, e.role ?? e.status ?? null, e.text ?? null]);

async function replay(svc: ServiceProcess, sid: string): Promise<Msg[]> {
  return (await svc.request("session.replay", {}, { session_id: sid })).payload.events as Msg[];
}

/** A fresh service process on the same state root: its replay of the session. */
async function replayFresh(rig: TurnRig, sid: string): Promise<Msg[]> {
  const next = new ServiceProcess({ home: rig.svc.home, cwd: rig.svc.cwd! });
  try {
    await next.initialize();
    return await replay(next, sid);
  } finally {
    next.end();
    await next.exited;
  }
}

/** Runs a first, ordinary turn; returns its session. */
async function firstTurn(rig: TurnRig): Promise<string> {
  rig.fake.script([{ steps: [{ text: "EARLIER-ANSWER" }] }]);
  const r = await startTurn(rig.svc, "EARLIER-QUESTION", "t0");
  assert.equal(terminalOf(await waitTerminal(rig.svc, "t0")).status, "completed");
  return r.payload.session_id as string;
}

describe("reactive compaction through the service", { concurrency: 2 }, () => {
  it("at turn start: compaction activity, the answer once, replay (here and in a fresh process) and the next turn see the summary", async () => {
    const rig = await startRig();
    try {
      const sid = await firstTurn(rig);
      const before = rig.fake.requests.length;
      rig.fake.script([OVERFLOW, { steps: [{ text: "SUMMARY-OF-EARLIER" }] }, { steps: [{ text: "The answer." }] }]);
      await startTurn(rig.svc, "NEW-PROMPT", "t1", sid);
      const ev = await waitTerminal(rig.svc, "t1");
      const t = terminalOf(ev);
      assert.equal(t.status, "completed");
      assert.equal(t.assistant_text, "The answer.");
      assert.equal(ev.filter((e) => e.event === "turn.assistant_delta").map((e) => e.payload.text).join(""), "The answer.");
      const comp = activities(ev).filter((a) => a.kind === "compaction");
      assert.deepEqual(comp.map((a) => [a.status, a.replay_required]), [
        ["triggered", false],
        ["running", false],
        ["completed", true],
      ]);
      assert.equal(rig.fake.requests.length - before, 3);

      const expected = [
        ["summary", null, "SUMMARY-OF-EARLIER"],
        ["message", "user", "NEW-PROMPT"],
        ["message", "assistant", "The answer."],
        ["terminal", "completed", null],
      ];
      assert.deepEqual(shape(await replay(rig.svc, sid)), expected);
      assert.deepEqual(shape(await replayFresh(rig, sid)), expected);

      // The next turn's context: the summary, this turn's prompt and answer once each, not the earlier turn.
      await startTurn(rig.svc, "and now?", "t2", sid);
      assert.equal(terminalOf(await waitTerminal(rig.svc, "t2")).status, "completed");
      const next = rig.fake.requests.at(-1)!.body;
      for (const s of ["SUMMARY-OF-EARLIER", "NEW-PROMPT", "The answer.", "and now?"]) assert.equal(next.split(s).length, 2, s);
      assert.ok(!next.includes("EARLIER-ANSWER"));
    } finally {
      await rig.close();
    }
  });

  it("mid-turn: the step is sent again without running its tools twice; replay shows the whole turn's text once", async () => {
    const rig = await startRig();
    try {
      const sid = await firstTurn(rig);
      rig.fake.script([
        { steps: [{ text: "Looking. " }, { toolCall: { id: "c1", name: "ls", arguments: {} } }] },
        OVERFLOW,
        { steps: [{ text: "SUMMARY-OF-WORK" }] },
        { steps: [{ text: "Done." }] },
      ]);
      await startTurn(rig.svc, "NEW-PROMPT", "t1", sid);
      const ev = await waitTerminal(rig.svc, "t1");
      const t = terminalOf(ev);
      assert.equal(t.status, "completed");
      assert.equal(t.assistant_text, "Looking. Done.");
      const acts = activities(ev);
      assert.equal(acts.filter((a) => a.kind === "tool" && a.status === "completed").length, 1, "the tool ran once");
      assert.deepEqual(acts.filter((a) => a.kind === "compaction").map((a) => a.status), ["triggered", "running", "completed"]);

      const expected = [
        ["summary", null, "SUMMARY-OF-WORK"],
        ["message", "user", "NEW-PROMPT"],
        ["message", "assistant", "Looking. Done."],
        ["terminal", "completed", null],
      ];
      assert.deepEqual(shape(await replay(rig.svc, sid)), expected);
      assert.deepEqual(shape(await replayFresh(rig, sid)), expected);
    } finally {
      await rig.close();
    }
  });

  it("the retry refused again ends the turn failed; the compaction stays recorded", async () => {
    const rig = await startRig();
    try {
      const sid = await firstTurn(rig);
      rig.fake.script([OVERFLOW, { steps: [{ text: "SUMMARY-OF-EARLIER" }] }, OVERFLOW]);
      await startTurn(rig.svc, "NEW-PROMPT", "t1", sid);
      const ev = await waitTerminal(rig.svc, "t1");
      const t = terminalOf(ev);
      assert.equal(t.status, "failed");
      assert.equal(t.assistant_text, "");
      assert.deepEqual(activities(ev).filter((a) => a.kind === "compaction").map((a) => a.status), ["triggered", "running", "completed"]);
      // The compaction was recorded: replay starts at its summary.
      assert.deepEqual(shape(await replayFresh(rig, sid)), [
        ["summary", null, "SUMMARY-OF-EARLIER"],
        ["message", "user", "NEW-PROMPT"],
        ["terminal", "failed", null],
      ]);
    } finally {
      await rig.close();
    }
  });
});
