/**
 * `agent_berth` end to end against the fake provider, over a spawned `berth stdio`: the nested Berth's approval is
 * relayed through the caller's gate with the `[berth-1 depth 1]` prefix, a cancel is relayed as `turn.cancel` (the
 * child's provider request is aborted), a child dying mid-turn fails the call; the delegation record (0600, owner and
 * agent PIDs) exists while the conversation lives; and a real orphan — a tagged `setsid` escapee left when the owning
 * `berth stdio` is SIGKILLed — is reaped by `berth daemon` at start (`delegations.reaped`).
 */
import assert from "node:assert/strict";
import { closeSync, existsSync, fstatSync, mkdtempSync, openSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { RecordedRequest } from "../fakes/fake-provider.js";
import { spawnStdio, startDaemon, startRig, type Msg, type Rig, type ScvClient } from "./client.js";
import { pidExists } from "../helpers/run-child.js";

const posts = (rig: Rig): RecordedRequest[] => rig.fake.requests.filter((r) => r.method === "POST");
async function waitPosts(rig: Rig, n: number): Promise<RecordedRequest> {
  for (;;) {
    const p = posts(rig);
    if (p.length >= n) return p[n - 1]!;
    await rig.fake.waitForRequests(rig.fake.requests.length + 1);
  }
}
function records(home: string): Msg[] {
  const dir = join(home, "run", "delegations");
  if (!existsSync(dir)) return [];
  const out: Msg[] = [];
  for (const n of readdirSync(dir)) {
    if (!n.endsWith(".json") || n.startsWith(".")) continue;
    // A record can go between the listing and the read (its run ended): read it through one descriptor, skip it if gone.
    let fd: number;
    try {
      fd = openSync(join(dir, n), "r");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw e;
    }
    try {
      out.push({ ...(JSON.parse(readFileSync(fd, "utf8")) as Msg), mode: fstatSync(fd).mode & 0o777 });
    } finally {
      closeSync(fd);
    }
  }
  return out;
}
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
async function approveNext(c: ScvClient, from: number): Promise<Msg> {
  const a = await c.waitFor((m) => m.type === "approval.requested", from, "approval.requested");
  c.request({ type: "approval.resolve", session_id: a.session_id, approval_id: a.approval_id, approved: true });
  return a;
}

describe("agent_berth", () => {
  let rig: Rig;
  before(async () => {
    rig = await startRig();
  });
  after(async () => {
    await rig.fake.close();
  });

  it("relays the nested approval with its prefix and returns the nested reply", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "deleg-ws-"));
    const { client: c, child, exited } = spawnStdio(rig.env);
    const s = await c.open({}, cwd);
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_d", name: "agent_berth", arguments: { prompt: "write the file" } } }] },
      { steps: [{ toolCall: { id: "call_n", name: "bash", arguments: { command: "echo nested > nested.txt" } } }] },
      { steps: [{ text: "nested done" }] },
      { steps: [{ text: "parent done" }] },
    ]);
    const from = c.frames.length;
    const turn = c.turn(s.session_id, "delegate it");
    const outer = await approveNext(c, from);
    assert.equal(outer.name, "agent_berth");
    assert.equal(outer.risk, "delegate");
    const nested = await approveNext(c, c.frames.indexOf(outer) + 1);
    assert.equal(nested.summary, "[berth-1 depth 1] Run shell command: echo nested > nested.txt");
    assert.equal(nested.call_id, "call_d");
    const { terminal, frames } = await turn;
    assert.equal(terminal.type, "turn.completed");
    const done = frames.find((m) => m.type === "tool.completed" && m.call_id === "call_d")!;
    assert.equal(done.success, true);
    const out = JSON.parse(done.output as string) as Msg;
    assert.deepEqual({ agent: out.agent, status: out.status, session: out.session, turn: out.turn, reply: out.reply }, {
      agent: "berth",
      status: "completed",
      session: "berth-1",
      turn: 1,
      reply: "nested done",
    });
    assert.equal(readFileSync(join(cwd, "nested.txt"), "utf8"), "nested\n");
    // The nested session runs in the private home, not the caller's.
    assert.ok(existsSync(join(rig.home, "adapters", "berth", "settings.json")));
    const recs = records(rig.home);
    assert.equal(recs.length, 1);
    assert.equal(recs[0]!.mode, 0o600);
    assert.equal(recs[0]!.owner_pid, child.pid);
    assert.equal(recs[0]!.conversation, "berth-1");
    assert.equal(recs[0]!.depth, 1);
    assert.equal(recs[0]!.session, s.session_id);
    assert.ok(pidExists(recs[0]!.pid as number));
    assert.ok(frames.some((m) => m.type === "tool.progress" && m.call_id === "call_d" && /\[berth-1 depth 1\]/.test(m.text as string)));
    c.end();
    assert.equal(await exited, 0);
    // Closing the session ended the conversation: its process and record are gone.
    assert.equal(pidExists(recs[0]!.pid as number), false);
    assert.deepEqual(records(rig.home), []);
  });

  it("relays a cancel as turn.cancel and fails a call whose child dies mid-turn", async () => {
    const { client: c, exited } = spawnStdio(rig.env);
    const s = await c.open({ auto_approve: true });
    const base = posts(rig).length;
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_c", name: "agent_berth", arguments: { prompt: "slow work" } } }] },
      { waitForAbortBeforeHeaders: true },
    ]);
    const from = c.frames.length;
    const turn = c.turn(s.session_id, "delegate slowly");
    await approveNext(c, from);
    const held = await waitPosts(rig, base + 2);
    const started = await c.waitFor((m) => m.type === "turn.started", from);
    c.request({ type: "turn.cancel", session_id: s.session_id, turn_id: started.turn_id });
    await held.socketClosed;
    const { terminal, frames } = await turn;
    assert.equal(terminal.type, "turn.cancelled");
    const tc = frames.find((m) => m.type === "tool.completed" && m.call_id === "call_c")!;
    assert.equal(tc.error, "cancelled");

    // A child SIGKILLed mid-turn: the call fails, the conversation and its record end, the model goes on.
    const base2 = posts(rig).length;
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_k", name: "agent_berth", arguments: { prompt: "doomed" } } }] },
      { waitForAbortBeforeHeaders: true },
      { steps: [{ text: "the helper died" }] },
    ]);
    const from2 = c.frames.length;
    const turn2 = c.turn(s.session_id, "delegate again");
    await approveNext(c, from2);
    await waitPosts(rig, base2 + 2);
    const rec = records(rig.home).find((r) => r.conversation !== "berth-1" && pidExists(r.pid as number));
    assert.ok(rec, "the running conversation has a record");
    process.kill(rec.pid as number, "SIGKILL");
    const r2 = await turn2;
    assert.equal(r2.terminal.type, "turn.completed");
    const tk = r2.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_k")!;
    assert.equal(tk.success, false);
    assert.equal(tk.error, "failed");
    assert.match(tk.output as string, /exited mid-turn/);
    await until(() => !records(rig.home).some((r) => r.handle === rec.handle), "the dead run's record to go");
    c.end();
    assert.equal(await exited, 0);
  });

  it("a berth daemon reaps the orphan a SIGKILLed berth stdio left behind", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "deleg-orphan-"));
    const { client: c, child, exited } = spawnStdio(rig.env);
    const s = await c.open({}, cwd);
    const base = posts(rig).length;
    // The command waits until the escapee has left the call's process group (the group is killed when bash ends).
    const escape = `setsid sh -c 'echo $$ > escapee.tmp && mv escapee.tmp escapee.pid; exec sleep 300' > /dev/null 2>&1 < /dev/null & while [ ! -s escapee.pid ]; do sleep 0.05; done`;
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_o", name: "agent_berth", arguments: { prompt: "start a server" } } }] },
      { steps: [{ toolCall: { id: "call_e", name: "bash", arguments: { command: escape } } }] },
      { waitForAbortBeforeHeaders: true },
    ]);
    const from = c.frames.length;
    void c.turn(s.session_id, "delegate a server").catch(() => undefined);
    const outer = await approveNext(c, from);
    await approveNext(c, c.frames.indexOf(outer) + 1);
    await waitPosts(rig, base + 3);
    await until(() => existsSync(join(cwd, "escapee.pid")), "the escapee");
    const escapee = Number(readFileSync(join(cwd, "escapee.pid"), "utf8"));
    assert.ok(pidExists(escapee));
    const rec = records(rig.home).find((r) => r.session === s.session_id)!;
    child.kill("SIGKILL");
    await exited;
    // The nested Berth ends at EOF; the escapee (tagged with SCV_PARENT) outlives both.
    await until(() => !pidExists(rec.pid as number), "the nested Berth to exit");
    assert.ok(pidExists(escapee), "the escapee is an orphan now");
    const d = await startDaemon(rig.env);
    try {
      const dc = await d.connect();
      await dc.initialize();
      const id = dc.request({ type: "daemon.control", command: { action: "status" } });
      const st = await dc.reply(id, ["daemon.status"]);
      assert.equal(st.status.delegations.reaped, 1);
      assert.equal(st.status.delegations.active, 0);
      await until(() => !pidExists(escapee), "the escapee to be killed");
      assert.deepEqual(records(rig.home), []);
      dc.end();
      await dc.closed;
    } finally {
      assert.equal(await d.stop(), 0);
    }
  });
});

describe("delegations over the daemon socket", () => {
  it("lists a live run from a berth stdio and stops it by handle", async () => {
    const rig = await startRig();
    const d = await startDaemon(rig.env);
    const { client: c, child, exited } = spawnStdio(rig.env);
    try {
      const s = await c.open();
      const base = posts(rig).length;
      rig.fake.script([
        { steps: [{ toolCall: { id: "call_l", name: "agent_berth", arguments: { prompt: "hold on" } } }] },
        { waitForAbortBeforeHeaders: true },
        { steps: [{ text: "it was stopped" }] },
      ]);
      const from = c.frames.length;
      const turn = c.turn(s.session_id, "delegate and wait");
      // Observed later; a failed assertion before that must show itself, not an unhandled rejection.
      turn.catch(() => undefined);
      await approveNext(c, from);
      await waitPosts(rig, base + 2);
      const dc = await d.connect();
      await dc.initialize();
      const ask = async (command: Msg): Promise<Msg> => dc.reply(dc.request({ type: "daemon.control", command }), ["daemon.status"]);
      const listed = await ask({ action: "delegations", all: false });
      assert.equal(listed.status.delegations.active, 1);
      const [e] = listed.status.delegations.entries as Msg[];
      assert.ok(e);
      assert.equal(e.agent, "berth");
      assert.equal(e.session, s.session_id);
      assert.equal(e.depth, 1);
      assert.equal(e.owner_pid, child.pid);
      assert.equal(e.orphaned, false);
      assert.equal(e.turn, 1);
      assert.match(e.conversation as string, /^berth-\d+$/);
      assert.match(e.handle as string, /^berth-[0-9a-f]{6}$/);
      assert.ok((e.processes as number) >= 1);
      const killed = await ask({ action: "delegation_kill", handle: e.handle, orphans: false });
      assert.deepEqual(killed.status.delegations.killed, [e.handle]);
      assert.deepEqual(killed.status.delegations.entries, []);
      const r = await turn;
      const tc = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_l")!;
      assert.equal(tc.error, "failed");
      assert.equal(r.terminal.type, "turn.completed");
      assert.equal((await ask({ action: "delegation_kill", handle: e.handle })).code, "delegation_error");
      dc.end();
      await dc.closed;
      c.end();
      assert.equal(await exited, 0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      assert.equal(await d.stop(), 0);
      await rig.fake.close();
    }
  });
});
