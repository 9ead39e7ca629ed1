import { test } from "node:test";
import assert from "node:assert/strict";
import { TODO_MAX_CONTENT_CHARS, TODO_MAX_ENTRIES, todoEntries, todoWriteTool } from "../../src/runtime/tools/todo-write.js";
import { call, makeCtx, tempDir } from "./helpers.js";

const entry = (i: number) => ({ content: `step ${i}`, status: "pending" });

void test("todo_write: records the list, confirms with counts, read-only", async (t) => {
  const ctx = makeCtx(tempDir(t));
  assert.equal(todoWriteTool.risk, "read_only");
  const r = await call(
    todoWriteTool,
    { todos: [{ content: "read", status: "completed", priority: "high" }, { content: "edit", status: "in_progress" }, { content: "test", status: "pending", priority: "low" }] },
    ctx,
  );
  assert.equal(r.isError, false);
  assert.equal(r.content, "Todo list updated: 3 entries (1 completed, 1 in progress, 1 pending).");
  assert.equal((await call(todoWriteTool, { todos: [] }, ctx)).content, "Todo list cleared.");
  assert.deepEqual(todoEntries({ todos: [{ content: "x", status: "pending" }] }), [{ content: "x", status: "pending", priority: "medium" }]);
});

void test("todo_write: limits at and one past; bad status, priority and fields refused with their path", async (t) => {
  const ctx = makeCtx(tempDir(t));
  const atMax = await call(todoWriteTool, { todos: Array.from({ length: TODO_MAX_ENTRIES }, (_, i) => entry(i)) }, ctx);
  assert.equal(atMax.isError, false);
  const past = await call(todoWriteTool, { todos: Array.from({ length: TODO_MAX_ENTRIES + 1 }, (_, i) => entry(i)) }, ctx);
  assert.equal(past.isError, true);
  assert.equal(past.errorKind, "invalid_arguments");
  assert.match(past.content, /todos: must have at most 50 entries/);
  assert.equal((await call(todoWriteTool, { todos: [{ content: "x".repeat(TODO_MAX_CONTENT_CHARS), status: "pending" }] }, ctx)).isError, false);
  const long = await call(todoWriteTool, { todos: [{ content: "x".repeat(TODO_MAX_CONTENT_CHARS + 1), status: "pending" }] }, ctx);
  assert.match(long.content, /todos\[0\]\.content: must be at most 500 characters/);
  const bad = await call(todoWriteTool, { todos: [{ content: "a", status: "done" }, { content: "b", status: "pending", priority: "urgent", extra: 1 }] }, ctx);
  assert.equal(bad.isError, true);
  assert.match(bad.content, /todos\[0\]\.status: must be one of pending, in_progress, completed/);
  assert.match(bad.content, /todos\[1\]\.priority: must be one of high, medium, low/);
  assert.match(bad.content, /todos\[1\]\.extra: unknown field/);
  assert.match((await call(todoWriteTool, { todos: "x" }, ctx)).content, /todos: expected array/);
  assert.equal(todoEntries({ todos: [{ content: "a", status: "done" }] }), null);
  assert.deepEqual((todoWriteTool.spec.inputSchema.properties as Record<string, Record<string, unknown>>)["todos"]?.["maxItems"], TODO_MAX_ENTRIES);
});
