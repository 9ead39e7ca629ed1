/**
 * `todo_write` through the spawned `berth acp` and the fake provider: the call shows as an ordinary `think` tool call
 * and, once it succeeds, as a schema-valid `plan` update with the whole list (priority defaulted); `session/load`
 * replays the plan; a refused list sends no plan.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AcpRig, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

it("projects a todo_write call as a plan update, replayed on load; an invalid list sends none", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-plan-"));
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  const todos = [
    { content: "Read the code", status: "completed", priority: "high" },
    { content: "Fix the bug", status: "in_progress" },
  ];
  rig.fake.script([
    { steps: [{ toolCall: { id: "call-plan", name: "todo_write", arguments: { todos } } }] },
    { steps: [{ toolCall: { id: "call-bad", name: "todo_write", arguments: { todos: [{ content: "x", status: "done" }] } } }] },
    { steps: [{ text: "Planned." }] },
  ]);
  const r = await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "plan it" }] });
  assert.equal(r.stopReason, "end_turn");
  const us = p.updatesOf(sessionId);
  const call = us.find((u) => u.sessionUpdate === "tool_call" && u.toolCallId === "call-plan");
  assert.ok(call && call.sessionUpdate === "tool_call");
  assert.equal(call.kind, "think");
  assert.equal(call.title, "Update plan");
  const plans = us.filter((u) => u.sessionUpdate === "plan");
  assert.equal(plans.length, 1);
  const expected = [
    { content: "Read the code", status: "completed", priority: "high" },
    { content: "Fix the bug", status: "in_progress", priority: "medium" },
  ];
  assert.deepEqual(plans[0], { sessionUpdate: "plan", entries: expected });
  // The plan follows its call's completion.
  const done = us.findIndex((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "call-plan" && u.status === "completed");
  assert.ok(done !== -1 && done < us.indexOf(plans[0]));
  const bad = us.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "call-bad" && u.status === "failed");
  assert.ok(bad, "the refused list fails as a tool call");
  assert.deepEqual(p.invalid, []);
  await p.end();

  const q = rig.spawn({ cwd });
  await q.initialize();
  await q.agent.request("session/load", { sessionId, cwd, mcpServers: [] });
  const replayed = q.updatesOf(sessionId).filter((u) => u.sessionUpdate === "plan");
  assert.deepEqual(replayed, [{ sessionUpdate: "plan", entries: expected }]);
  assert.deepEqual(q.invalid, []);
  await q.end();
});
