/**
 * Background `agent_berth` jobs over a spawned `berth stdio` against the fake provider: the starting call's
 * `tool.completed.jobs` names the job `running`; a job that ends unseen is reported in a server-started turn
 * (`request_id` `background:1`, `origin{kind:"background", jobs}` on `turn.started` and the terminal); a job the
 * model waited for is named settled by `agent_wait` and never reported again.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { FakeTurn } from "../fakes/fake-provider.js";
import { spawnStdio, startRig, type Msg, type Rig, type ScvClient } from "./client.js";

/** Routes each provider request by what its conversation holds (parent and nested requests interleave). */
function route(_api: unknown, json: unknown): FakeTurn {
  const s = JSON.stringify(json);
  const call = (id: string, name: string, args: Record<string, unknown>): FakeTurn => ({ steps: [{ toolCall: { id, name, arguments: args } }] });
  if (s.includes("Background job job-1")) return { steps: [{ text: "reported" }] };
  if (s.includes("PARENT-A")) return s.includes("call_b1") ? { steps: [{ text: "started" }] } : call("call_b1", "agent_berth", { prompt: "CHILD-TASK one\nmore", background: true });
  if (s.includes("PARENT-B")) {
    if (s.includes("call_w")) return { steps: [{ text: "waited" }] };
    if (s.includes("call_b2")) return call("call_w", "agent_wait", {});
    return call("call_b2", "agent_berth", { prompt: "CHILD-TASK two", background: true });
  }
  if (s.includes("PARENT-C")) return s.includes("call_b3") ? { steps: [{ text: "started" }] } : call("call_b3", "agent_berth", { prompt: "CHILD-BASH", background: true });
  if (s.includes("CHILD-BASH")) return s.includes("call_sh") ? { steps: [{ text: "child finished" }] } : call("call_sh", "bash", { command: "echo unattended > unattended.txt" });
  if (s.includes("CHILD-TASK")) return { steps: [{ text: "child done" }] };
  return { steps: [{ text: "ok" }] };
}

async function approveAll(c: ScvClient, stop: () => boolean): Promise<void> {
  let from = 0;
  while (!stop()) {
    const a = await c.waitFor((m) => m.type === "approval.requested" || m.type === "turn.completed", from).catch(() => null);
    if (a === null) return;
    from = c.frames.indexOf(a) + 1;
    if (a.type === "approval.requested") c.request({ type: "approval.resolve", session_id: a.session_id, approval_id: a.approval_id, approved: true });
  }
}

describe("background jobs", () => {
  let rig: Rig;
  before(async () => {
    rig = await startRig({ fake: { defaultTurn: route } });
  });
  after(async () => {
    await rig.fake.close();
  });

  it("reports a job that ended unseen in a server-started turn", async () => {
    const { client: c, exited } = spawnStdio(rig.env);
    const s = await c.open();
    let done = false;
    const approving = approveAll(c, () => done);
    const { terminal, frames } = await c.turn(s.session_id, "PARENT-A delegate in background");
    assert.equal(terminal.type, "turn.completed");
    const started = frames.find((m) => m.type === "tool.completed" && m.call_id === "call_b1")!;
    assert.equal(started.success, true);
    assert.deepEqual(started.jobs, [{ job: "job-1", tool: "agent_berth", status: "running", task: "CHILD-TASK one" }]);
    assert.equal((JSON.parse(started.output as string) as Msg).job, "job-1");
    const report = await c.waitFor((m) => m.type === "turn.started" && m.request_id === "background:1", 0, "the report turn");
    assert.deepEqual(report.origin, { kind: "background", jobs: ["job-1"] });
    const end = await c.waitFor((m) => m.request_id === "background:1" && m.type === "turn.completed", 0, "the report's end");
    assert.deepEqual(end.origin, { kind: "background", jobs: ["job-1"] });
    const text = c.frames.find((m) => m.request_id === "background:1" && m.type === "assistant.completed")!;
    assert.equal(text.content, "reported");
    done = true;
    c.end();
    assert.equal(await exited, 0);
    await approving;
  });

  it("a job the model waited for is settled by agent_wait and never reported", async () => {
    const { client: c, exited } = spawnStdio(rig.env);
    const s = await c.open();
    let done = false;
    const approving = approveAll(c, () => done);
    const { terminal, frames } = await c.turn(s.session_id, "PARENT-B delegate then wait");
    assert.equal(terminal.type, "turn.completed");
    const waited = frames.find((m) => m.type === "tool.completed" && m.call_id === "call_w")!;
    assert.equal(waited.success, true);
    assert.deepEqual(waited.jobs, [{ job: "job-1", tool: "agent_berth", status: "completed", task: "CHILD-TASK two" }]);
    const out = JSON.parse(waited.output as string) as Msg;
    assert.match(out.jobs[0].result as string, /child done/);
    // A later client turn runs next: no report turn came in between.
    const next = await c.turn(s.session_id, "anything else");
    assert.equal(next.terminal.type, "turn.completed");
    assert.ok(!c.frames.some((m) => m.origin !== undefined), "no server-started turn");
    done = true;
    c.end();
    assert.equal(await exited, 0);
    await approving;
  });

  for (const autoApprove of [true, false]) {
    it(`a job's nested approval gets the unattended answer (auto_approve ${autoApprove})`, async () => {
      const cwd = mkdtempSync(join(tmpdir(), "jobs-unattended-"));
      const { client: c, exited } = spawnStdio(rig.env);
      const s = await c.open({ auto_approve: autoApprove }, cwd);
      let done = false;
      const approving = approveAll(c, () => done);
      await c.turn(s.session_id, "PARENT-C delegate a shell job");
      await c.waitFor((m) => m.request_id === "background:1" && m.type === "turn.completed", 0, "the report turn");
      assert.equal(existsSync(join(cwd, "unattended.txt")), autoApprove);
      assert.ok(!c.frames.some((m) => m.type === "approval.requested" && String(m.summary).startsWith("[berth-")), "a job's approvals never reach the client");
      done = true;
      c.end();
      assert.equal(await exited, 0);
      await approving;
    });
  }
});
