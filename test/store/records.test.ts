/** Strict write-side validation of session records and headers (tolerant reads are covered in session-store tests). */
import { it } from "node:test";
import assert from "node:assert/strict";
import { decodeHeader, encodeRecord, validateHeader, validateNewRecord } from "../../src/store/sessions/records.js";

it("accepts each record kind with exactly its fields", () => {
  const good: unknown[] = [
    { kind: "user", turn_id: "t", text: "hi" },
    { kind: "assistant", turn_id: "t", message_id: "m", text: "", partial: true },
    { kind: "assistant", turn_id: "t", message_id: "m", text: "x", partial: false, thinking: [{ text: "r", signature: "s" }, { text: "r2" }] },
    { kind: "tool_call", turn_id: "t", message_id: "m", call_id: "c", name: "bash", arguments: { command: "ls" } },
    { kind: "tool_result", turn_id: "t", call_id: "c", name: "bash", content: "out", is_error: false },
    { kind: "terminal", turn_id: "t", status: "cancelled", assistant_text: "part" },
    { kind: "checkpoint", summary: "s", cutoff_seq: 0 },
  ];
  for (const r of good) assert.equal(validateNewRecord(r), true, JSON.stringify(r));
  assert.equal(encodeRecord(good[0] as never, 3, "2026-01-01T00:00:00.000Z"), '{"seq":3,"at":"2026-01-01T00:00:00.000Z","kind":"user","turn_id":"t","text":"hi"}');
});

it("rejects unknown kinds and fields, missing or mistyped fields, bad bounds and ill-formed strings", () => {
  const bad: unknown[] = [
    null,
    [],
    { kind: "nope", turn_id: "t" },
    { kind: "user", turn_id: "t" },
    { kind: "user", turn_id: "t", text: "hi", extra: 1 },
    { kind: "user", turn_id: "", text: "hi" },
    { kind: "user", turn_id: "x".repeat(257), text: "hi" },
    { kind: "user", turn_id: "t", text: "\uD800" },
    { kind: "assistant", turn_id: "t", message_id: "m", text: "x", partial: "yes" },
    { kind: "assistant", turn_id: "t", message_id: "m", text: "x", partial: true, thinking: [{ text: "r", other: 1 }] },
    { kind: "tool_call", turn_id: "t", message_id: "m", call_id: "c", name: "bash", arguments: [] },
    { kind: "terminal", turn_id: "t", status: "done", assistant_text: "" },
    { kind: "checkpoint", summary: "s", cutoff_seq: -1 },
    { kind: "checkpoint", summary: "s", cutoff_seq: 1.5 },
  ];
  for (const r of bad) assert.equal(validateNewRecord(r), false, JSON.stringify(r));
  assert.throws(() => encodeRecord(bad[4] as never, 1, "t"));
});

it("headers: strict on write, tolerant of newer fields on read", () => {
  const h = { kind: "header", format: 1, session_id: "s1", created_at: "2026-01-01T00:00:00.000Z", cwd: "/w" };
  assert.equal(validateHeader(h), true);
  assert.equal(validateHeader({ ...h, extra: 1 }), false);
  assert.equal(validateHeader({ ...h, session_id: "s".repeat(129) }), false);
  assert.deepEqual(decodeHeader(JSON.stringify({ ...h, newer: true })), h);
  assert.equal(decodeHeader(JSON.stringify({ ...h, format: 2 })), null);
  assert.equal(decodeHeader("not json"), null);
});
