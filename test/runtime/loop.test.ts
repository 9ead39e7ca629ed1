/** Runtime-level tests (no wire): approvals, tool error kinds, no_tools, images, prompt queue, tool env, history. */
import { it } from "node:test";
import assert from "node:assert/strict";
import { runLoop } from "../../src/runtime/turn-loop.js";
import { cleanToolEnv } from "../../src/runtime/env.js";
import { historyToMessages, TURN_INTERRUPTED } from "../../src/runtime/history.js";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";


const completed = (ev: RuntimeEvent[]) => ev.filter((e) => e.type === "tool" && e.phase === "completed") as Array<Extract<RuntimeEvent, { type: "tool" }>>;

it("tool lifecycle and error kinds: unknown_tool, invalid_arguments, denied; approval asked per policy", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([
      { steps: [{ toolCall: { id: "a", name: "nope", arguments: {} } }, { toolCall: { id: "b", name: "read", arguments: { wrong: 1 } } }, { toolCall: { id: "c", name: "ls", arguments: {} } }, { toolCall: { id: "d", name: "glob", arguments: { pattern: "*" } } }] },
      { steps: [{ text: "end" }] },
    ]);
    const events: RuntimeEvent[] = [];
    const asked: string[] = [];
    const out = await runLoop(
      loopOptions(fake, events, {
        approval: { policy: (n) => (n === "glob" ? "auto" : "ask"), ask: (r) => (asked.push(r.toolName), Promise.resolve("deny")) },
      }),
    );
    assert.equal(out.status, "completed");
    assert.deepEqual(asked, ["ls"]);
    assert.deepEqual(completed(events).map((e) => [e.callId, e.errorKind ?? "ok"]), [["a", "unknown_tool"], ["b", "invalid_arguments"], ["c", "denied"], ["d", "ok"]]);
    const phases = events.filter((e) => e.type === "tool" && e.callId === "d").map((e) => (e as { phase: string }).phase);
    assert.deepEqual(phases.filter((p) => p !== "progress"), ["proposed", "started", "completed"]);
  } finally {
    await fake.close();
  }
});

it("cancelling while an approval is pending ends the call cancelled and the turn cancelled", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([{ steps: [{ toolCall: { id: "a", name: "ls", arguments: {} } }] }]);
    const ctl = new AbortController();
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loopOptions(fake, events, { signal: ctl.signal, approval: { policy: () => "ask", ask: () => (ctl.abort(), new Promise(() => undefined)) } }));
    assert.equal(out.status, "cancelled");
    assert.equal(completed(events)[0]!.errorKind, "cancelled");
  } finally {
    await fake.close();
  }
});

it("no_tools mode advertises no tools; images reach providers that accept them", async () => {
  const fake = await startFakeProvider();
  try {
    const out = await runLoop(
      loopOptions(fake, [], {
        tools: [],
        subagents: false,
        messages: [{ role: "user", content: [{ type: "text", text: "see" }, { type: "image", mediaType: "image/png", dataBase64: "iVBORw0KGgo=" }] }],
      }),
    );
    assert.equal(out.status, "completed");
    const body = fake.requests[0]!.json as Record<string, unknown>;
    assert.equal(body["tools"], undefined);
    assert.ok(fake.requests[0]!.body.includes("iVBORw0KGgo="));
  } finally {
    await fake.close();
  }
});

it("a refused delta stops the stream and fails the turn with the accepted text", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([{ steps: [{ text: "abcdef", chunks: 3 }] }]);
    let n = 0;
    const out = await runLoop(loopOptions(fake, [], { sink: { delta: () => ++n < 3, event: () => undefined } }));
    assert.deepEqual([out.status, out.reason, out.assistantText], ["failed", "output_limit", "abcd"]);
  } finally {
    await fake.close();
  }
});

it("tool env strips provider credentials and Berth variables", () => {
  const env = cleanToolEnv({ PATH: "/bin", ANTHROPIC_API_KEY: "SECRETMARKER", OPENAI_API_KEY: "SECRETMARKER", MY_KEY: "SECRETMARKER", MC_HOME: "/h", BERTH_X: "1" }, ["MY_KEY"]);
  assert.deepEqual(env, { PATH: "/bin" });
});

it("history: segments join, dangling tool calls get interrupted results, summary leads", () => {
  const at = "2025-01-01T00:00:00Z";
  const msgs = historyToMessages({
    checkpoint: { kind: "checkpoint", summary: "S", cutoff_seq: 1, seq: 9, at },
    records: [
      { kind: "user", turn_id: "t", text: "q", seq: 2, at },
      { kind: "assistant", turn_id: "t", message_id: "m1.0", text: "par", partial: true, seq: 3, at },
      { kind: "assistant", turn_id: "t", message_id: "m1.1", text: "tial", partial: true, seq: 4, at },
      { kind: "tool_call", turn_id: "t", message_id: "m1", call_id: "c", name: "ls", arguments: {}, seq: 5, at },
    ],
    complete: true,
    badLines: 0,
    torn: false,
  });
  assert.equal(msgs.length, 4);
  assert.deepEqual(msgs[0], { role: "user", content: [{ type: "text", text: "Summary of the earlier conversation (compacted):\nS" }, { type: "text", text: "q" }] });
  assert.deepEqual(msgs[1]!.content, [{ type: "text", text: "partial" }, { type: "tool_call", id: "c", name: "ls", arguments: {} }]);
  assert.equal((msgs[2] as { isError: boolean }).isError, true);
  // The turn never ended (a crash): it is closed as interrupted so the next prompt stands alone.
  assert.deepEqual(msgs[3], { role: "assistant", content: [{ type: "text", text: TURN_INTERRUPTED }] });
});

it("history: an interrupted turn keeps its partial text and the next prompt is its own message; attachments are listed", () => {
  const at = "2025-01-01T00:00:00Z";
  const msgs = historyToMessages({
    checkpoint: null,
    records: [
      { kind: "user", turn_id: "t1", text: "try the build again", seq: 1, at },
      { kind: "terminal", turn_id: "t1", status: "failed", assistant_text: "", seq: 2, at },
      { kind: "user", turn_id: "t2", text: "fix bar.c", seq: 3, at, attachments: [{ kind: "image", path: "/tmp/p.png", name: "p.png", size: 3 }] },
      { kind: "assistant", turn_id: "t2", message_id: "m.0", text: "work", partial: true, seq: 4, at },
      { kind: "terminal", turn_id: "t2", status: "cancelled", assistant_text: "work", seq: 5, at },
      { kind: "user", turn_id: "t3", text: "next", seq: 6, at },
    ],
    complete: true,
    badLines: 0,
    torn: false,
  });
  assert.deepEqual(
    msgs.map((m) => [m.role, m.role === "tool" ? m.content : m.content.map((b) => (b.type === "text" ? b.text : b.type))]),
    [
      ["user", ["try the build again"]],
      ["assistant", [TURN_INTERRUPTED]],
      ["user", ["fix bar.c\n\n[Attached files]\n- image, p.png, 3 bytes, /tmp/p.png"]],
      ["assistant", ["work", TURN_INTERRUPTED]],
      ["user", ["next"]],
      ["assistant", [TURN_INTERRUPTED]],
    ],
  );
});
