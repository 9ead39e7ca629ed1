/** TurnStream sequencing/drops and the activity projection, driven through a recording emitter. */
import { it } from "node:test";
import assert from "node:assert/strict";
import { TurnStream, jsonEscapedBytes } from "../../src/protocols/app-service/turn-events.js";
import { activityId, projectActivity, projectSummary } from "../../src/protocols/app-service/activity.js";
import { createHash } from "node:crypto";
import { OutputLimitError, encodeEvent, encodeNumberedEvent, eventTail } from "../../src/protocols/app-service/output.js";

function recorder() {
  const out: Array<{ event: string; payload: Record<string, any> }> = [];
  let gate: { p: Promise<void>; open: () => void } | null = null;
  return {
    out,
    /** While closed, emits resolve only when opened (output backpressure). */
    close() {
      let open!: () => void;
      const p = new Promise<void>((r) => (open = r));
      gate = { p, open };
    },
    open() {
      gate?.open();
      gate = null;
    },
    emit: (event: string, _sid: string | null, payload: Record<string, unknown> | string) => {
      out.push({ event, payload: (typeof payload === "string" ? JSON.parse(payload) : payload) as Record<string, any> });
      return gate?.p ?? Promise.resolve();
    },
  };
}

const ctx = { type: "context", currentTokens: 1, maxTokens: 2, reasoningTokens: null, requestSequence: 1, source: "fallback_estimate" } as const;

it("dropped activity consumes sequence numbers and is counted; deltas are never dropped @req AS-TURN-26", async () => {
  const r = recorder();
  const s = new TurnStream(r.emit, "turn-1", "s1", 2);
  s.started();
  assert.equal(await s.delta("a"), true);
  r.close();
  for (let i = 0; i < 5; i++) s.event(ctx); // 2 fit the queue, 3 dropped
  const pending = s.delta("b"); // waits for the output, is not dropped
  let settled = false;
  void Promise.resolve(pending).then(() => (settled = true));
  await new Promise((x) => setImmediate(x));
  assert.equal(settled, false, "a delta waits for backpressure");
  r.open();
  assert.equal(await pending, true);
  s.event({ type: "tool", phase: "progress", callId: "c", name: "bash", transport: "local", line: "x" }); // excluded: not counted
  s.terminal("completed", "ab");
  const seqs = r.out.map((e) => [e.event, e.payload.sequence]);
  assert.deepEqual(seqs, [
    ["turn.started", 0],
    ["turn.assistant_delta", 1],
    ["turn.activity", 2],
    ["turn.activity", 3],
    ["turn.assistant_delta", 7],
    ["turn.terminal", 8],
  ]);
  assert.equal(r.out.at(-1)!.payload.activity_dropped, 3);
  s.event(ctx);
  assert.equal(r.out.length, 6, "nothing after the terminal");
});

it("terminal-size check counts JSON escaping @req AS-TURN-25", async () => {
  for (const t of ["plain", 'q"uote', "\u0000\u001f", "é", "😀", "\ud800x", "\u007f", "\u2028"]) {
    assert.equal(jsonEscapedBytes(t), Buffer.byteLength(JSON.stringify(t)) - 2, JSON.stringify(t));
  }
  const r = recorder();
  const s = new TurnStream(r.emit, "turn-1", "s1", 64, 100, 10_000);
  assert.equal(await s.delta("x".repeat(100)), true);
  assert.equal(await s.delta("y"), false);
});

const TRICKY = ["plain words ", 'q"uote', "back\\slash", "\u0000\u001f\b\t\n\f\r", "é", "😀", "\ud800x", "x\udc00", "\u007f", "\u2028\u2029", "<\/script>", "~ !#[]{}", ""];

it("delta payloads and lines are the bytes the object encoding wrote (unicode and escapes included) @req AS-TURN-25", () => {
  const raw: string[] = [];
  const s = new TurnStream((_e, _sid, p) => (raw.push(p as string), Promise.resolve()), 'turn-"1\u00e9', "s1");
  for (const t of TRICKY) void s.delta(t);
  assert.equal(raw.length, TRICKY.length);
  TRICKY.forEach((text, i) => {
    const want = JSON.stringify({ turn_id: 'turn-"1\u00e9', sequence: i + 1, text });
    assert.equal(raw[i], want, JSON.stringify(text));
    for (const sid of ["s1", null]) {
      const line = encodeEvent(`ev-${i + 7}`, "req-\u00e9", sid, "turn.assistant_delta", JSON.parse(want) as Record<string, unknown>);
      assert.equal(encodeNumberedEvent(i + 7, eventTail("req-\u00e9", sid, "turn.assistant_delta"), raw[i]), line);
      assert.equal(encodeEvent(`ev-${i + 7}`, "req-\u00e9", sid, "turn.assistant_delta", raw[i]), line);
    }
  });
});

it("an outbound payload is bounded by its UTF-8 bytes, also when its length is far below the bound", () => {
  // {"t":"…"} is 8 bytes around the text; "é" is one UTF-16 unit and two UTF-8 bytes.
  const fill = (bytes: number): Record<string, unknown> => ({ t: "é".repeat((bytes - 8) / 2) });
  const at = encodeEvent("ev-1", "r", null, "turn.activity", fill(32_768));
  assert.equal(Buffer.byteLength(JSON.stringify(fill(32_768))), 32_768);
  assert.ok(at.length < 32_768, "the payload's length alone is under the bound");
  assert.throws(() => encodeEvent("ev-1", "r", null, "turn.activity", fill(32_770)), OutputLimitError, "one character past the bound");
  const json = JSON.stringify(fill(32_770));
  assert.throws(() => encodeNumberedEvent(1, eventTail("r", null, "turn.assistant_delta"), json), OutputLimitError);
});

it("the text bounds hold exactly on the plain and the escaped paths @req AS-TURN-25", async () => {
  for (const [a, b] of [["x", "y"], ["é", "ü"], ['"', "\\"]] as const) {
    const r = recorder();
    const one = Buffer.byteLength(a);
    const s = new TurnStream(r.emit, "turn-1", "s1", 64, 100 * one, 1_000_000);
    assert.equal(await s.delta(a.repeat(99)), true);
    assert.equal(await s.delta(b), true, "at the text bound");
    assert.equal(await s.delta(b), false, "one past the text bound");
  }
  for (const [a, esc] of [["x", 1], ['"', 2], ["\u0001", 6]] as const) {
    const r = recorder();
    const overhead = Buffer.byteLength(JSON.stringify({ turn_id: "turn-1", session_id: "s1", status: "cancelled", assistant_text: "", sequence: Number.MAX_SAFE_INTEGER, activity_dropped: Number.MAX_SAFE_INTEGER, activity_replay_available: false, replay_required: true }));
    const s = new TurnStream(r.emit, "turn-1", "s1", 64, 1_000_000, overhead + 50 * esc);
    assert.equal(await s.delta(a.repeat(49)), true);
    assert.equal(await s.delta(a), true, "at the payload bound");
    assert.equal(await s.delta(a), false, "one past the payload bound");
    assert.deepEqual(r.out.map((e) => e.payload.text), [a.repeat(49), a]);
  }
});

it("activity IDs are namespace-prefixed SHA-256; stream-level kinds reuse one ID per turn @req AS-TURN-27", () => {
  const a = projectActivity("turn-1", ctx)!;
  const b = projectActivity("turn-1", { ...ctx, currentTokens: 9 })!;
  const c = projectActivity("turn-2", ctx)!;
  assert.match(String(a.activity_id), /^context-[0-9a-f]{64}$/);
  assert.equal(a.activity_id, b.activity_id);
  assert.notEqual(a.activity_id, c.activity_id);
  const tool = projectActivity("turn-1", { type: "tool", phase: "started", callId: "/etc/passwd", name: "mcp__srv__x", transport: "mcp", serverName: "srv" })!;
  assert.ok(!JSON.stringify(tool).includes("passwd") && !JSON.stringify(tool).includes("srv"));
  assert.equal(tool.tool_name, null);
  assert.equal(projectActivity("turn-1", { type: "tool", phase: "proposed", callId: "c", name: "ls", transport: "local" }), null);
});

it("activity IDs stay the SHA-256 of their namespace and raw identity when recent ones are reused and evicted", () => {
  const expected = (ns: string, raw: string): string => `${ns}-${createHash("sha256").update(`berth-activity-v1\u0000${ns}\u0000${raw}`).digest("hex")}`;
  // Past the memo's 256 entries, twice over, with repeats of early and late identities in between.
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 600; i++) {
      const ns = i % 3 === 0 ? "context" : i % 3 === 1 ? "lifecycle" : "tool-call";
      assert.equal(activityId(ns, `turn-${i}`), expected(ns, `turn-${i}`));
      assert.equal(activityId(ns, `turn-${i}`), expected(ns, `turn-${i}`), "the reused ID");
      if (i % 50 === 0) assert.equal(activityId("context", "turn-0"), expected("context", "turn-0"));
    }
  }
  assert.notEqual(activityId("usage", "t"), activityId("subagent-usage", "t"));
  assert.equal(activityId("usage", "é😀"), expected("usage", "é😀"));
});

it("reasoning summaries are sanitized, capped at 2,048 bytes, and omitted past 16,384 @req AS-TURN-28", () => {
  assert.deepEqual(projectSummary("plain"), { text: "plain", redacted: false, truncated: false });
  const red = projectSummary("key sk-ant-abcdefghijklmnopqrstuv and \u0007bell");
  assert.equal(red.redacted, true);
  assert.ok(!red.text.includes("sk-ant") && !red.text.includes("\u0007"));
  const long = projectSummary("é".repeat(2000)); // 4,000 bytes
  assert.equal(long.truncated, true);
  assert.equal(Buffer.byteLength(long.text), 2048);
  // at the cap a summary is whole; one byte past it is cut to the cap
  assert.deepEqual(projectSummary("a".repeat(2048)), { text: "a".repeat(2048), redacted: false, truncated: false });
  assert.deepEqual(projectSummary("a".repeat(2049)), { text: "a".repeat(2048), redacted: false, truncated: true });
  assert.deepEqual(projectSummary("a".repeat(16385)), { text: "", redacted: false, truncated: true });
  assert.equal(projectSummary("a".repeat(16384)).truncated, true);
  const wire = projectActivity("t", { type: "reasoning_summary", text: "thought" })!;
  assert.deepEqual(Object.keys(wire).sort(), ["activity_id", "kind", "redacted", "text", "truncated"]);
});
