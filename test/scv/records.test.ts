/**
 * Delegation records and the confirm registry, with real processes and an injected clock: a record whose agent PID
 * now belongs to another process (start time differs) never matches and is dropped without touching that process;
 * an owner whose PID was reused counts as gone (the run is an orphan); stopping a run ends its group, TERM first;
 * a question nobody follows for a minute is withdrawn and the chat is told.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import type { ChatBridge } from "../../src/channels/common/bridge.js";
import type { ConfirmState } from "../../src/channels/common/confirm.js";
import { ConfirmRegistry, FOLLOW_MS } from "../../src/cli/daemon-confirm.js";
import { delegationsDir, processStart, scan, stopRun, writeRecord, type DelegationRecord } from "../../src/runtime/delegation/records.js";
import { pidExists } from "../helpers/run-child.js";

async function record(home: string, over: Partial<DelegationRecord>): Promise<DelegationRecord> {
  const r: DelegationRecord = {
    handle: "codex-abc123",
    agent: "codex",
    instance: "0a1b2c3d",
    session: "s1",
    depth: 1,
    pid: 1,
    pid_start: null,
    owner_pid: process.pid,
    owner_start: await processStart(process.pid),
    cwd: home,
    started_unix_seconds: 0,
    ...over,
  };
  await writeRecord(home, r);
  return r;
}

it("a reused PID never matches a record; a reused owner PID makes an orphan; stopRun ends the group", { skip: process.platform !== "linux" }, async () => {
  const home = mkdtempSync(join(tmpdir(), "deleg-rec-"));
  const sleeper = spawn("sleep", ["300"], { stdio: "ignore", detached: true });
  const pid = sleeper.pid!;
  const start = await processStart(pid);
  try {
    // Agent PID alive but started at another time: a different process; the stale record goes, the process stays.
    await record(home, { handle: "codex-aaaaaa", pid, pid_start: `${Number(start) + 1}` });
    assert.deepEqual(await scan(home), []);
    assert.ok(pidExists(pid));
    // The right agent, an owner whose PID now names another process: an orphan.
    const r = await record(home, { handle: "codex-bbbbbb", pid, pid_start: start, owner_start: "1" });
    assert.equal(statSync(join(delegationsDir(home), "codex-bbbbbb.json")).mode & 0o777, 0o600);
    const [v] = await scan(home);
    assert.equal(v?.orphaned, true);
    assert.deepEqual(v?.pids, [pid]);
    const closed = new Promise<NodeJS.Signals | null>((res) => sleeper.once("exit", (_c, sig) => res(sig)));
    await stopRun(home, r);
    assert.equal(await closed, "SIGTERM");
    assert.deepEqual(await scan(home), []);
  } finally {
    if (sleeper.exitCode === null && sleeper.signalCode === null) sleeper.kill("SIGKILL");
  }
});

// Only scan() here, never stopRun: before the fix these records named the init process (whose group is every
// orphaned process) or an unrelated process, and the daemon's reaper would have signalled them.
it("a damaged or tampered record never names init, a negative PID or a process it cannot identify", { skip: process.platform !== "linux" }, async () => {
  const home = mkdtempSync(join(tmpdir(), "deleg-rec-"));
  const gone = spawn("true", { stdio: "ignore" });
  const deadOwner = gone.pid!;
  await new Promise((r) => gone.once("exit", r));
  const sleeper = spawn("sleep", ["300"], { stdio: "ignore", detached: true });
  const pid = sleeper.pid!;
  try {
    // PID 1 (even with its true start time), 0 and negative PIDs: not a record this code writes; skipped, kept.
    for (const [i, bad] of [1, 0, -1, -pid].entries())
      await record(home, { handle: `codex-bad00${i}`, pid: bad, pid_start: bad === 1 ? await processStart(1) : null, owner_pid: deadOwner, owner_start: "1" });
    assert.deepEqual(await scan(home), []);
    assert.ok(statSync(join(delegationsDir(home), "codex-bad000.json")).isFile(), "a damaged record is left for the user to see");
    // A live PID one past the bad ones, but no start time to prove it is the agent: not matched; the stale record goes.
    await record(home, { handle: "codex-cccccc", pid, pid_start: null, owner_pid: deadOwner, owner_start: "1" });
    assert.deepEqual(await scan(home), []);
    assert.throws(() => statSync(join(delegationsDir(home), "codex-cccccc.json")), /ENOENT/);
    assert.ok(pidExists(pid));
    // The same PID with its start time is the agent: an orphan to reap.
    const r = await record(home, { handle: "codex-dddddd", pid, pid_start: await processStart(pid), owner_pid: deadOwner, owner_start: "1" });
    const [v] = await scan(home);
    assert.equal(v?.record.handle, r.handle);
    assert.equal(v?.orphaned, true);
    assert.deepEqual(v?.pids, [pid]);
  } finally {
    sleeper.kill("SIGKILL");
  }
});

it("a question nobody follows for a minute is withdrawn; following keeps it", () => {
  let now = 1_000_000;
  const reg = new ConfirmRegistry(() => now);
  let withdrawn = 0;
  let settle!: (s: ConfirmState) => void;
  const bridge = {
    ask: () => new Promise<{ id: string; state: ConfirmState }>((r) => (settle = (state) => r({ id: "b", state }))),
    withdrawQuestion: () => {
      withdrawn++;
      settle("withdrawn");
    },
  } as unknown as ChatBridge;
  const q = reg.ask("Ship it?", 1800, { chat: "wechat:default", bridge });
  assert.equal(q.state, "pending");
  assert.equal(q.deadline_unix_seconds, 1000 + 1800);
  assert.ok(reg.waiting("wechat:default"));
  now += FOLLOW_MS - 1;
  assert.equal(reg.follow(q.id)?.state, "pending", "followed just in time");
  now += FOLLOW_MS - 1;
  reg.sweep();
  assert.equal(withdrawn, 0);
  now += 1;
  reg.sweep();
  assert.equal(withdrawn, 1);
  assert.equal(reg.follow(q.id)?.state, "withdrawn");
  assert.equal(reg.waiting("wechat:default"), false);
  assert.equal(reg.follow("000000000000"), null);
});
