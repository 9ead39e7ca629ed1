/**
 * A command Berth runs itself (the editor advertised no terminal) is ended with its whole process group, however the
 * turn ends: `session/cancel`, `session/close`, or SIGTERM of `berth acp`. A background job the command started
 * (`sleep 1000 &`, then `wait`) does not outlive it.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pidAlive } from "../../src/store/process-alive.js";
import { type AcpAgentProcess, type AcpRig, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

/** Resolves once `pred` holds, re-checked as `berth acp` writes (stderr or frames) or every few ms. */
async function until(p: AcpAgentProcess, pred: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; stderr: ${p.stderr.slice(0, 600)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts a turn running `command` (default `sh -c 'sleep 1000 & wait'`), which writes its background job's PID to
 * `bg.pid`; resolves with the prompt and that PID.
 */
async function startCommand(p: AcpAgentProcess, cwd: string, command?: string): Promise<{ sessionId: string; prompt: Promise<unknown>; pid: number }> {
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
  const pidFile = join(cwd, "bg.pid");
  const run = command ?? `sh -c 'sleep 1000 & echo $! > ${pidFile}; wait'`;
  rig.fake.script([{ steps: [{ toolCall: { id: "long", name: "bash", arguments: { command: run } } }] }, { steps: [{ text: "unused" }] }]);
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "run it" }] });
  prompt.catch(() => undefined);
  await until(p, () => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"), "the background job's PID");
  const pid = Number(readFileSync(pidFile, "utf8").trim());
  assert.ok(pidAlive(pid), "the background job runs");
  return { sessionId, prompt, pid };
}

const kill = (pid: number): void => {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
};

it("session/cancel during a command ends its background job before the turn's answer", { timeout: 60_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-group-"));
  const p = rig.spawn({ cwd });
  const { sessionId, prompt, pid } = await startCommand(p, cwd);
  try {
    await p.agent.notify("session/cancel", { sessionId });
    assert.deepEqual(await prompt, { stopReason: "cancelled" });
    assert.equal(pidAlive(pid), false, "the background job is gone");
    rig.fake.unscript();
    assert.deepEqual(await p.end(), { code: 0, signal: null });
  } finally {
    kill(pid);
  }
});

it("session/close during a command ends its background job before the close's answer", { timeout: 60_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-group-"));
  const p = rig.spawn({ cwd });
  const { sessionId, prompt, pid } = await startCommand(p, cwd);
  try {
    await p.agent.request("session/close", { sessionId });
    assert.equal(pidAlive(pid), false, "the background job is gone");
    await prompt.catch(() => undefined);
    rig.fake.unscript();
    assert.deepEqual(await p.end(), { code: 0, signal: null });
  } finally {
    kill(pid);
  }
});

it("SIGTERM of berth acp during a command ends its background job before berth acp exits", { timeout: 60_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-group-"));
  const p = rig.spawn({ cwd });
  const { pid } = await startCommand(p, cwd);
  try {
    p.child.kill("SIGTERM");
    const exit = await p.exited;
    assert.equal(pidAlive(pid), false, `the background job is gone (berth acp exited ${JSON.stringify(exit)})`);
    rig.fake.unscript();
  } finally {
    kill(pid);
  }
});

it("a second SIGTERM while berth acp ends a command that ignores SIGTERM still kills the command's group", { timeout: 60_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-group-"));
  const p = rig.spawn({ cwd });
  // The shell the tool runs dies of SIGTERM; its child and the background job ignore it.
  const outer = join(cwd, "outer.pid");
  const { pid } = await startCommand(p, cwd, `echo $$ > ${outer}; sh -c 'trap "" TERM; sleep 1000 & echo $! > ${join(cwd, "bg.pid")}; wait'; true`);
  const shell = Number(readFileSync(outer, "utf8").trim());
  try {
    p.child.kill("SIGTERM");
    await until(p, () => !pidAlive(shell), "the group's SIGTERM");
    p.child.kill("SIGTERM");
    const exit = await p.exited;
    // The exit's SIGKILL is sent before berth acp is gone, but a signalled process dies when it next runs: on a loaded
    // machine that can be after the test sees the exit. Nothing else will kill it (the finally's kill comes later).
    await until(p, () => !pidAlive(pid), `the background job's death (berth acp exited ${JSON.stringify(exit)})`);
    rig.fake.unscript();
  } finally {
    kill(pid);
  }
});
