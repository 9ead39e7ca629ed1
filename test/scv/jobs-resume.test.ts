/**
 * A `berth stdio` SIGKILLed while a background `agent_codex` job runs, and the session resumed in a fresh
 * `berth stdio`: the orphaned agent process is stopped (no daemon is running to reap it), the job the history shows
 * is named as ended with the earlier process (`unavailable`, not "no job" nor "discarded"), and the next job takes a
 * new handle (`job-2`), never the one the history already names. The fake `codex` speaks the real `exec --json`
 * stream and, for a prompt saying "hang", writes its PID and never ends.
 */
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { CliAgents } from "../../src/cli/delegates/cli-agents.js";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import { spawnStdio, startRig, type Msg, type ScvClient } from "./client.js";
import { pidExists } from "../helpers/run-child.js";

const FAKE_CODEX = (pidFile: string): string => `#!${process.execPath}
let prompt = "";
process.stdin.on("data", (d) => (prompt += d));
process.stdin.on("end", () => {
  const e = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
  e({ type: "thread.started", thread_id: "0199a213-81c0-7800-8aa1-bbab2a035a53" });
  require("fs").writeFileSync(${JSON.stringify(pidFile)} + ".tmp", String(process.pid));
  require("fs").renameSync(${JSON.stringify(pidFile)} + ".tmp", ${JSON.stringify(pidFile)});
  setInterval(() => {}, 1000);
});
`;

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function approveNext(c: ScvClient, from: number): Promise<void> {
  const a = await c.waitFor((m) => m.type === "approval.requested", from, "approval.requested");
  c.request({ type: "approval.resolve", session_id: a.session_id, approval_id: a.approval_id, approved: true });
}

it("a session resumed after its berth stdio was SIGKILLed mid-job: the orphan is stopped, the job named as ended, the next one is job-2", { skip: process.platform !== "linux", timeout: 30_000 }, async () => {
  const rig = await startRig();
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-"));
  const pidFile = join(bin, "agent.pid");
  writeFileSync(join(bin, "codex"), FAKE_CODEX(pidFile));
  chmodSync(join(bin, "codex"), 0o755);
  const env = { ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
  const cwd = mkdtempSync(join(tmpdir(), "resume-ws-"));
  const first = spawnStdio(env);
  let agent = 0;
  try {
    const s = await first.client.open({}, cwd);
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_bg", name: "agent_codex", arguments: { prompt: "hang on this", background: true } } }] },
      { steps: [{ text: "started" }] },
    ]);
    const from = first.client.frames.length;
    const turn = first.client.turn(s.session_id, "start a job");
    await approveNext(first.client, from);
    const r = await turn;
    const started = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_bg")!;
    assert.deepEqual((started.jobs as Msg[]).map((j) => [j.job, j.status]), [["job-1", "running"]]);
    await until(() => existsSync(pidFile), "the agent to start");
    agent = Number(readFileSync(pidFile, "utf8"));
    first.child.kill("SIGKILL");
    await first.exited;
    assert.ok(pidExists(agent), "the agent outlives the killed berth stdio (its own process group)");

    const second = spawnStdio(env);
    try {
      const s2 = await second.client.open({ resume: s.session_id }, cwd);
      assert.equal(s2.session_id, s.session_id);
      await until(() => !pidExists(agent), "the orphaned agent to be stopped once the session is resumed");
      rig.fake.script([
        { steps: [{ toolCall: { id: "call_st", name: "agent_status", arguments: { job: "job-1" } } }] },
        { steps: [{ toolCall: { id: "call_bg2", name: "agent_codex", arguments: { prompt: "hang again", background: true } } }] },
        { steps: [{ text: "ok" }] },
      ]);
      const from2 = second.client.frames.length;
      const turn2 = second.client.turn(s.session_id, "how is the job?");
      await approveNext(second.client, from2);
      const r2 = await turn2;
      assert.equal(r2.terminal.type, "turn.completed");
      const st = r2.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_st")!;
      assert.equal(st.success, false);
      assert.equal(st.error, "unavailable");
      assert.match(st.output as string, /job-1 was started before this session was last opened and was stopped when that connection or Berth process ended; its result is lost/);
      const bg2 = r2.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_bg2")!;
      assert.deepEqual((bg2.jobs as Msg[]).map((j) => j.job), ["job-2"]);
    } finally {
      second.client.end();
      await second.exited;
    }
  } finally {
    if (agent > 0 && pidExists(agent)) process.kill(agent, "SIGKILL");
    await rig.fake.close();
  }
});

it("a session closed while its background agent_codex job is still starting stops the agent at once", { skip: process.platform !== "linux", timeout: 20_000 }, async () => {
  // Before, the job's run attached its abort listener after the signal had fired (a listener added then never runs):
  // the agent ran on to its time limit (here the largest, an hour) and the session's close waited for it.
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-"));
  const pidFile = join(bin, "agent.pid");
  writeFileSync(join(bin, "codex"), FAKE_CODEX(pidFile));
  chmodSync(join(bin, "codex"), 0o755);
  const home = mkdtempSync(join(tmpdir(), "codex-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "codex-ws-"));
  const jobs = new JobBook(() => undefined);
  const agents = new CliAgents({ jobs, home, env: { PATH: bin } });
  const tool = agents.tools({ sessionId: "s1", depth: 0, cwd, unattended: () => "deny" }, 2).find((t) => t.spec.name === "agent_codex")!;
  const r = await tool.run({ prompt: "hang", background: true, timeout_seconds: 3600 }, { cwd, signal: new AbortController().signal, onProgress: () => undefined });
  assert.equal(JSON.parse(r.content).job, "job-1");
  // Closed at once, while the job's run is still starting its agent: the close resolves once the agent ended.
  await jobs.closeSession("s1");
  if (existsSync(pidFile)) await until(() => !pidExists(Number(readFileSync(pidFile, "utf8"))), "the agent to be stopped");
});
