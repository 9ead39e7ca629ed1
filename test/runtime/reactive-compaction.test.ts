/**
 * Reactive compaction (runtime level): a request the provider refuses as longer than the model's window, before any of
 * its output was accepted, is compacted and sent again once; every other case ends the turn as before.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { fdatasync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MID_TURN_NOTE } from "../../src/runtime/compaction.js";
import { estimateTokens } from "../../src/runtime/context.js";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import { builtinTools } from "../../src/runtime/tools/index.js";
import { TurnRecorder } from "../../src/runtime/recorder.js";
import { runLoop, type LoopOptions } from "../../src/runtime/turn-loop.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import type { Message } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider, type FakeTurn } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";

/** OpenAI's answer to a request over the window (HTTP 400, `context_length_exceeded`). */
const OPENAI_OVERFLOW: FakeTurn = {
  status: 400,
  body: JSON.stringify({ error: { message: "This model's maximum context length is 8192 tokens.", type: "invalid_request_error", code: "context_length_exceeded" } }),
};
/** Anthropic's: only its message says so. */
const ANTHROPIC_OVERFLOW: FakeTurn = {
  status: 400,
  body: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } }),
};
const OVERFLOW_LABEL = "provider returned an error status (HTTP 400 context_length_exceeded)";

/** Earlier history well under the estimate's threshold: only the provider's refusal can start a compaction. */
const history = (): Message[] => [
  { role: "user", content: [{ type: "text", text: "EARLIER-QUESTION" }] },
  { role: "assistant", content: [{ type: "text", text: "EARLIER-ANSWER" }] },
  { role: "user", content: [{ type: "text", text: "NEW-PROMPT" }] },
];

const loop = (fake: FakeProvider, events: RuntimeEvent[], over: Partial<LoopOptions> = {}): LoopOptions =>
  loopOptions(fake, events, { subagents: false, compactAtRatio: 0.8, messages: history(), ...over });

const statuses = (ev: RuntimeEvent[]): string[] => ev.flatMap((e) => (e.type === "compaction" ? [e.status] : []));
const estimates = (ev: RuntimeEvent[]): number[] => ev.flatMap((e) => (e.type === "context" && e.source === "fallback_estimate" ? [e.requestSequence] : []));
const bodies = (fake: FakeProvider): string[] => fake.requests.map((r) => r.body);

it("a request refused as over the window at turn start is compacted and sent again once; the turn completes", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([OPENAI_OVERFLOW, { steps: [{ text: "SUMMARY-OF-EARLIER" }] }, { steps: [{ text: "the answer" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "completed");
    assert.equal(out.assistantText, "the answer");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
    const [refused, summary, retry] = bodies(fake);
    assert.equal(fake.requests.length, 3);
    assert.ok(refused!.includes("EARLIER-ANSWER") && refused!.includes("NEW-PROMPT"));
    assert.ok(summary!.includes("Summarize the conversation") && summary!.includes("EARLIER-ANSWER") && !summary!.includes("NEW-PROMPT"));
    assert.ok(retry!.includes("SUMMARY-OF-EARLIER") && retry!.includes("NEW-PROMPT") && !retry!.includes("EARLIER-ANSWER"), "the retry carries the compacted context");
    assert.equal(retry!.split("NEW-PROMPT").length, 2, "the prompt once");
    // Each provider request of the turn has its own counter: the refused one (1), then the retry (2).
    assert.deepEqual(estimates(events), [1, 2]);
    assert.equal(out.usage.requests, 2);
    assert.deepEqual(events.filter((e) => e.type === "assistant_completed").map((e) => (e as { text: string }).text), ["the answer"]);
  } finally {
    await fake.close();
  }
});

it("mid-turn (Anthropic's 'prompt is too long' after a tool step): the same step is sent again, its tools not run twice", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([
      { steps: [{ text: "Looking. " }, { toolCall: { id: "a", name: "nope", arguments: {} } }] },
      ANTHROPIC_OVERFLOW,
      { steps: [{ text: "SUMMARY-OF-WORK" }] },
      { steps: [{ text: "Done." }] },
    ]);
    const events: RuntimeEvent[] = [];
    const provider = createProvider("fake", { api: "anthropic", baseUrl: fake.baseUrl }, () => Promise.resolve(null));
    const out = await runLoop(loop(fake, events, { provider }));
    assert.equal(out.status, "completed");
    assert.equal(out.assistantText, "Looking. Done.");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
    assert.equal(events.filter((e) => e.type === "tool" && e.phase === "completed").length, 1, "the tool ran once");
    assert.equal(fake.requests.length, 4);
    const retry = bodies(fake)[3]!;
    assert.ok(retry.includes("SUMMARY-OF-WORK") && retry.includes("NEW-PROMPT") && retry.includes(JSON.stringify(MID_TURN_NOTE).slice(1, 40)));
    assert.ok(!retry.includes("EARLIER-ANSWER") && !retry.includes("Looking."), "the turn's work so far is in the summary");
    assert.deepEqual(estimates(events), [1, 2, 3]);
  } finally {
    await fake.close();
  }
});

it("an in-stream overflow error before any output is compacted and retried too", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([{ steps: [{ streamError: "context_length_exceeded" }], end: false }, { steps: [{ text: "S" }] }, { steps: [{ text: "ok" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "completed");
    assert.equal(out.assistantText, "ok");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
  } finally {
    await fake.close();
  }
});

it("one reactive attempt per turn: the retry refused again ends the turn failed (compaction)", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([OPENAI_OVERFLOW, { steps: [{ text: "S" }] }, OPENAI_OVERFLOW, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "compaction");
    assert.equal(out.message, OVERFLOW_LABEL);
    assert.equal(out.assistantText, "");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
    assert.equal(fake.requests.length, 3, "no second compaction, no third request of the step");
  } finally {
    await fake.close();
  }
});

it("no reactive attempt once this turn attempted compaction (a failed proactive attempt)", async () => {
  const fake = await startFakeProvider();
  try {
    const big: Message[] = [...history()];
    big[1] = { role: "assistant", content: [{ type: "text", text: "y".repeat(4000) }] };
    const start = estimateTokens("s", big, builtinTools().map((t) => t.spec));
    // Over 0.8 of the window, under the whole: the proactive attempt fails (its summary request), the turn goes on.
    fake.script([{ status: 400 }, OPENAI_OVERFLOW, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events, { messages: big, contextWindow: Math.round(start / 0.85) }));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "compaction");
    assert.deepEqual(statuses(events), ["triggered", "running", "failed"]);
    assert.ok(bodies(fake).at(-1)!.includes("NEW-PROMPT") && !bodies(fake).at(-1)!.includes("Summarize the conversation"));
  } finally {
    await fake.close();
  }
});

it("no reactive attempt when the refused request's output was already accepted", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([{ steps: [{ text: "partial" }, { streamError: "context_length_exceeded" }], end: false }, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "compaction");
    assert.equal(out.assistantText, "partial");
    assert.deepEqual(statuses(events), []);
    assert.equal(fake.requests.length, 1);
  } finally {
    await fake.close();
  }
});

it("no reactive attempt with compaction disabled, or with nothing before the prompt to summarize", async () => {
  const fake = await startFakeProvider();
  try {
    for (const over of [{ compactAtRatio: null }, { messages: [{ role: "user", content: [{ type: "text", text: "only" }] }] as Message[] }]) {
      fake.script([OPENAI_OVERFLOW]);
      const events: RuntimeEvent[] = [];
      const before = fake.requests.length;
      const out = await runLoop(loop(fake, events, over));
      assert.equal(out.status, "failed");
      assert.equal(out.reason, "compaction");
      assert.equal(out.message, OVERFLOW_LABEL);
      assert.deepEqual(statuses(events), []);
      assert.equal(fake.requests.length - before, 1);
    }
  } finally {
    await fake.close();
  }
});

it("a reactive compaction whose summary request fails ends the turn with that failure", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([OPENAI_OVERFLOW, { status: 401 }, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "credential");
    assert.equal(out.message, "provider rejected the credential (HTTP 401 fake_error)");
    assert.deepEqual(statuses(events), ["triggered", "running", "failed"]);
    assert.equal(fake.requests.length, 2);
  } finally {
    await fake.close();
  }
});

it("cancelling during the reactive compaction ends the turn cancelled", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([OPENAI_OVERFLOW, { steps: [{ text: "partial summary" }, { waitForAbort: true }] }]);
    const events: RuntimeEvent[] = [];
    const ctl = new AbortController();
    const running = runLoop(loop(fake, events, { signal: ctl.signal }));
    // The turn ending first (no summary request) fails the test instead of waiting for a request that never comes.
    const ended = running.then((o) => assert.fail(`the turn ended ${o.status} before a summary request`));
    const summary = (await Promise.race([fake.waitForRequests(2), ended]))[1]!;
    assert.ok(summary.body.includes("Summarize the conversation"));
    ctl.abort();
    const out = await running;
    assert.equal(out.status, "cancelled");
    assert.deepEqual(statuses(events), ["triggered", "running", "cancelled"]);
    await summary.socketClosed;
    assert.equal(fake.requests.length, 2);
  } finally {
    await fake.close();
  }
});

it("a reactive compaction whose checkpoint cannot be written ends the turn failed (persistence) naming the disk's cause", async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "reactive-"));
  let file = "";
  // The file system refuses the fsync that would make the checkpoint durable (a disk that filled up).
  const store = new SessionStore({
    home,
    syncData: (fd) =>
      new Promise<void>((resolve, reject) => {
        if (file !== "" && readFileSync(file, "utf8").includes('"kind":"checkpoint"')) reject(Object.assign(new Error("no space"), { code: "ENOSPC" }));
        else fdatasync(fd, (e) => (e ? reject(e) : resolve()));
      }),
  });
  const h = await store.create(home);
  file = store.paths.data(h.id);
  try {
    const recorder = new TurnRecorder(h.writer, "t1");
    await recorder.user("NEW-PROMPT");
    fake.script([OPENAI_OVERFLOW, { steps: [{ text: "S" }] }, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events, { recorder }));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "persistence");
    assert.equal(out.message, "ENOSPC");
    assert.deepEqual(statuses(events), ["triggered", "running", "failed"]);
    assert.equal(fake.requests.length, 2, "no retry without the checkpoint");
  } finally {
    await h.release();
    await fake.close();
  }
});
