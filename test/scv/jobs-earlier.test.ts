/**
 * `agent_wait` and `agent_status` with no job named, in a session whose only jobs are earlier ones (they ended with
 * the session's earlier opening: a resume after the Berth process died, or a reconnect to the same process). Before,
 * both answered `{"jobs":[]}`, with no word of those jobs; they now answer `unavailable` in the words a named earlier
 * job gets. A session without earlier jobs, or with a job of this opening, answers with the view as before.
 * Driven through JobBook's own tools.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import type { Tool, ToolResult } from "../../src/runtime/types.js";

const ctx = { cwd: "/", signal: new AbortController().signal, onProgress: () => undefined };
const call = (tools: Tool[], name: string, args: Record<string, unknown>): Promise<ToolResult> => tools.find((t) => t.spec.name === name)!.run(args, ctx);
const LOST = (tool: string, handles: string): RegExp =>
  new RegExp(
    `^${tool}: no job has been started since this session was last opened; ${handles} were started before this session was last opened and were stopped when that connection or Berth process ended; their results are lost\\. Start the tasks again if they are still needed$`,
  );

it("a resumed session's agent_wait and agent_status with no job named say its earlier jobs ended with that opening", async () => {
  const b = new JobBook(() => undefined);
  // Resumed: its stored history names job-1 to job-3.
  const tools = b.tools("s1", () => 3);
  for (const [tool, args] of [["agent_wait", { timeout_seconds: 1 }], ["agent_status", {}]] as const) {
    const r = await call(tools, tool, args);
    assert.equal(r.isError, true, r.content);
    assert.equal(r.errorKind, "unavailable");
    assert.match(r.content, LOST(tool, "job-1 to job-3"));
  }
  // One job of this opening: the view as usual (the earlier ones are named only when asked for).
  await b.start("s1", "agent_codex", "new work", () => Promise.resolve<ToolResult>({ content: "new result", isError: false })).done;
  const r = await call(tools, "agent_wait", {});
  assert.equal(r.isError, false, r.content);
  assert.deepEqual((JSON.parse(r.content) as { jobs: Array<{ job: string }> }).jobs.map((j) => j.job), ["job-4"]);
});

it("a session reopened in the same process names its one earlier job; a fresh session still answers an empty view", async () => {
  const b = new JobBook(() => undefined);
  let tools = b.tools("s1");
  await b.start("s1", "agent_berth", "work", () => Promise.resolve<ToolResult>({ content: "done", isError: false })).done;
  await b.closeSession("s1");
  tools = b.tools("s1");
  const r = await call(tools, "agent_wait", {});
  assert.equal(r.errorKind, "unavailable", r.content);
  assert.equal(
    r.content,
    "agent_wait: no job has been started since this session was last opened; job-1 was started before this session was last opened and was stopped when that connection or Berth process ended; its result is lost. Start the task again if it is still needed",
  );
  const fresh = await call(b.tools("s2"), "agent_wait", {});
  assert.equal(fresh.isError, false);
  assert.equal(fresh.content, '{"jobs":[]}');
});
