/**
 * Mid-turn compaction through the spawned service and the loopback fake provider: a tool loop whose context
 * crosses the compaction threshold between provider steps compacts and continues; replay and the next turn's
 * context after the checkpoint; cancellation during compaction; compaction that cannot fit the window.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fakeSettings, startRig, startTurn, waitTerminal, type Msg, type TurnRig } from "./helpers.js";

const PROMPT = "Please read big.txt and report.";
const MARK = "FILE-LINE-CONTENT";

const terminalOf = (events: Msg[]): Msg => events.find((e) => e.event === "turn.terminal")!.payload;
const activities = (events: Msg[]): Msg[] => events.filter((e) => e.event === "turn.activity").map((e) => e.payload.activity);

function assertSequences(events: Msg[]): void {
  events.forEach((e, i) => assert.equal(e.payload.sequence, i, "no activity dropped: sequences are consecutive"));
  assert.equal(events.filter((e) => e.event === "turn.terminal").length, 1);
  assert.equal(events.at(-1)!.event, "turn.terminal");
}

/**
 * Measures this rig's first-request estimate E0 for PROMPT (a throwaway turn), then writes a file of about
 * `fileShare`·E0 tokens and a window W such that the request after reading the file is estimated at about
 * `fill`·W (the first request stays under 0.8·W).
 */
async function prepare(rig: TurnRig, fileShare: number, fill: number): Promise<{ window: number }> {
  await startTurn(rig.svc, PROMPT, "measure");
  const ev = await waitTerminal(rig.svc, "measure");
  const e0 = activities(ev).find((a) => a.kind === "context" && a.source === "fallback_estimate")!.current_tokens as number;
  const line = `${MARK} ${"x".repeat(60)}`;
  const lines = Math.ceil((e0 * fileShare * 4) / (line.length + 1));
  writeFileSync(join(rig.svc.cwd!, "big.txt"), `${line}\n`.repeat(lines));
  // The read adds the file plus ≈ 40 tokens (assistant text, the call, message overheads).
  const window = Math.round((e0 + (lines * (line.length + 1)) / 4 + 40) / fill);
  assert.ok(e0 < 0.8 * window);
  writeFileSync(join(rig.svc.home, "settings.json"), JSON.stringify(fakeSettings(rig.fake.baseUrl, { contextWindow: window })));
  return { window };
}

const readStep = { steps: [{ text: "Reading the file. " }, { toolCall: { id: "r1", name: "read", arguments: { path: "big.txt" } } }] };

async function replay(rig: TurnRig, sid: string): Promise<Msg[]> {
  const rep = await rig.svc.request("session.replay", {}, { session_id: sid });
  return rep.payload.events as Msg[];
}

describe("mid-turn compaction through the service", { concurrency: 3 }, () => {
  it("a tool loop crossing the threshold compacts between steps and continues; replay and the next turn see summary + whole turn @req AS-TURN-35 @req AS-TURN-36", async () => {
    const rig = await startRig();
    try {
      const { window } = await prepare(rig, 0.2, 0.83);
      const before = rig.fake.requests.length;
      rig.fake.script([
        readStep,
        { steps: [{ text: "PROGRESS-SUMMARY: big.txt was read" }] },
        { steps: [{ text: "Do" }, { delayMs: 1000 }, { text: "ne." }] },
      ]);
      const r = await startTurn(rig.svc, PROMPT, "m1");
      const sid = r.payload.session_id as string;
      // While the turn runs after the checkpoint (its partial text persisted by the recorder's 250 ms timer),
      // replay shows the summary, then the whole turn so far: the prompt and the text from before and after it.
      await rig.fake.waitForRequests(before + 3);
      let live: Msg[] = [];
      const deadline = Date.now() + 60_000;
      while (!live.some((e) => e.role === "assistant" && e.text === "Reading the file. Do") && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 50));
        live = await replay(rig, sid);
      }
      assert.deepEqual(
        live.map((e) => [e.kind, e.role ?? e.status ?? null, e.text ?? null]),
        [
          ["summary", null, "PROGRESS-SUMMARY: big.txt was read"],
          ["message", "user", PROMPT],
          ["message", "assistant", "Reading the file. Do"],
        ],
      );
      const ev = await waitTerminal(rig.svc, "m1");
      const t = terminalOf(ev);
      assert.equal(t.status, "completed");
      assert.equal(t.assistant_text, "Reading the file. Done.", "text accepted before and after compaction");
      assertSequences(ev);

      const acts = activities(ev);
      const comp = acts.filter((a) => a.kind === "compaction");
      assert.deepEqual(comp.map((a) => [a.status, a.replay_required]), [
        ["triggered", false],
        ["running", false],
        ["completed", true],
      ]);
      assert.equal(new Set(comp.map((a) => a.activity_id)).size, 1, "one ID per compaction attempt");
      assert.ok(comp[0]!.current_tokens >= 0.8 * window && comp[0]!.max_tokens === window);
      assert.ok(comp[1]!.current_tokens === null && comp[1]!.max_tokens === null);
      assert.ok(comp[2]!.current_tokens < 0.8 * window && comp[2]!.max_tokens === window);
      // Order: the read completes, compaction runs, then the next request is counted.
      const idx = (f: (a: Msg) => boolean): number => acts.findIndex(f);
      const toolDone = idx((a) => a.kind === "tool" && a.status === "completed");
      const next = idx((a) => a.kind === "context" && a.request_sequence === 2 && a.source === "fallback_estimate");
      assert.ok(toolDone < acts.indexOf(comp[0]!) && acts.indexOf(comp[2]!) < next);
      assert.ok(acts[next]!.current_tokens < 0.8 * window);

      const [, summaryReq, afterReq] = rig.fake.requests.slice(before).map((q) => q.body);
      assert.ok(summaryReq!.includes("Summarize the conversation") && summaryReq!.includes(MARK), "the summary covers the turn's tool work");
      assert.ok(afterReq!.includes("PROGRESS-SUMMARY") && afterReq!.includes(PROMPT) && !afterReq!.includes(MARK), "compacted context: summary + prompt");
      assert.equal(rig.fake.requests.length - before, 3);

      const items = await replay(rig, sid);
      assert.deepEqual(
        items.map((e) => [e.kind, e.role ?? e.status ?? null, e.text ?? null]),
        [
          ["summary", null, "PROGRESS-SUMMARY: big.txt was read"],
          ["message", "user", PROMPT],
          ["message", "assistant", "Reading the file. Done."],
          ["terminal", "completed", null],
        ],
      );

      // The next turn's context is the summary and the turn's records after the checkpoint, not the file.
      await startTurn(rig.svc, "and now?", "m2", sid);
      assert.equal(terminalOf(await waitTerminal(rig.svc, "m2")).status, "completed");
      const nextReq = rig.fake.requests.at(-1)!.body;
      for (const s of ["PROGRESS-SUMMARY", PROMPT, "Reading the file. ", "Done.", "and now?"]) assert.ok(nextReq.includes(s), s);
      assert.ok(!nextReq.includes(MARK) && !nextReq.includes("Summarize the conversation"));
      assert.equal(nextReq.split(PROMPT).length, 2, "the turn's prompt appears once");
    } finally {
      await rig.close();
    }
  });

  it("cancelling during compaction: compaction cancelled (replay_required), terminal cancelled, no checkpoint @req AS-TURN-38", async () => {
    const rig = await startRig();
    try {
      await prepare(rig, 0.2, 0.83);
      const before = rig.fake.requests.length;
      rig.fake.script([readStep, { steps: [{ text: "partial summary" }, { waitForAbort: true }] }]);
      const r = await startTurn(rig.svc, PROMPT, "k1");
      const sid = r.payload.session_id as string;
      // Cancel once the summary request is streaming.
      const summaryReq = (await rig.fake.waitForRequests(before + 2))[before + 1]!;
      assert.ok(summaryReq.body.includes("Summarize the conversation"));
      while (!rig.svc.lines.some((l) => l.includes('"kind":"compaction"') && l.includes('"status":"running"'))) await rig.svc.waitLines(rig.svc.lines.length + 1);
      const c = await rig.svc.request("turn.cancel", { turn_id: r.payload.turn_id });
      assert.equal(c.payload.status, "cancellation_requested");
      const ev = await waitTerminal(rig.svc, "k1");
      const t = terminalOf(ev);
      assert.equal(t.status, "cancelled");
      assert.equal(t.assistant_text, "Reading the file. ");
      assertSequences(ev);
      assert.deepEqual(activities(ev).filter((a) => a.kind === "compaction").map((a) => [a.status, a.replay_required]), [
        ["triggered", false],
        ["running", false],
        ["cancelled", true],
      ]);
      await summaryReq.socketClosed;
      const items = await replay(rig, sid);
      assert.deepEqual(
        items.map((e) => [e.kind, e.role ?? e.status ?? null, e.text ?? null]),
        [
          ["message", "user", PROMPT],
          ["message", "assistant", "Reading the file. "],
          ["terminal", "cancelled", null],
        ],
      );
    } finally {
      await rig.close();
    }
  });

  it("compaction that cannot bring the context under the window ends compaction_required (wire failed) @req AS-TURN-37", async () => {
    const rig = await startRig();
    try {
      const { window } = await prepare(rig, 1.5, 1.05);
      // The request after the read is over the whole window: the summary request is cut to fit, but a summary
      // larger than the window cannot help — nothing is recorded and the turn cannot continue.
      rig.fake.script([readStep, { steps: [{ text: "S".repeat(window * 5), chunks: 8 }] }]);
      const r = await startTurn(rig.svc, PROMPT, "f1");
      const ev = await waitTerminal(rig.svc, "f1");
      const t = terminalOf(ev);
      assert.equal(t.status, "failed");
      assert.equal(t.assistant_text, "Reading the file. ");
      assert.deepEqual(activities(ev).filter((a) => a.kind === "compaction").map((a) => a.status), ["triggered", "running", "failed"]);
      const summaryReq = rig.fake.requests.at(-1)!.body;
      assert.ok(summaryReq.includes("Summarize the conversation") && summaryReq.includes("characters omitted for the summary") && summaryReq.includes(MARK));
      const items = await replay(rig, r.payload.session_id as string);
      assert.deepEqual(items.map((e) => [e.kind, e.role ?? e.status ?? null]), [
        ["message", "user"],
        ["message", "assistant"],
        ["terminal", "compaction_required"],
      ]);
    } finally {
      await rig.close();
    }
  });
});
