/**
 * Hostile clients on the shared daemon socket: a connection naming another connection's session, approval or turn
 * gets the spec's refusal and changes nothing there; a client that disappears while its approval is pending (its
 * socket destroyed, no EOF handshake) has its turn cancelled, the tool never runs, its session's lease is released
 * (another connection can then resume it), and the daemon keeps serving everyone else. A client that reconnects at
 * once, while its dropped turn is still stopping, has its resume wait for that release instead of being refused.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Socket } from "node:net";
import { startDaemon, startRig, type Daemon, type Msg, type Rig, type ScvClient } from "./client.js";

/** Whether process `pid` still exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `cond` (bounded) until it holds. */
async function until(cond: () => boolean, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("hostile clients on the daemon socket", () => {
  let rig: Rig;
  let d: Daemon;
  before(async () => {
    rig = await startRig();
    d = await startDaemon(rig.env);
  });
  after(async () => {
    await d.stop();
    await rig.fake.close();
  });

  /** Starts a turn whose bash call waits for approval; resolves with the approval.requested frame. */
  async function pendingApproval(c: ScvClient, sid: string, command: string): Promise<Msg> {
    rig.fake.script([{ steps: [{ toolCall: { id: "call_x", name: "bash", arguments: { command } } }] }]);
    const from = c.frames.length;
    const rid = c.request({ type: "turn.start", session_id: sid, prompt: "run it" });
    return c.waitFor((m) => m.request_id === rid && m.type === "approval.requested", from, "approval.requested");
  }

  it("another connection's session, approval and turn IDs are refused and change nothing", async () => {
    const a = await d.connect();
    const sa = await a.open();
    const b = await d.connect();
    const sb = await b.open();
    const marker = join(sa.cwd as string, "ran");
    const ask = await pendingApproval(a, sa.session_id as string, `touch ${marker}`);
    const refusal = async (msg: Msg): Promise<Msg> => b.reply(b.request(msg), []);
    const cases: Array<[Msg, string, string]> = [
      [{ type: "approval.resolve", session_id: sa.session_id, approval_id: ask.approval_id, approved: true }, "session_not_found", "no such session on this connection"],
      [{ type: "approval.resolve", session_id: sb.session_id, approval_id: ask.approval_id, approved: true }, "approval_not_found", "no pending approval with this ID"],
      [{ type: "turn.cancel", session_id: sa.session_id, turn_id: ask.turn_id }, "session_not_found", "no such session on this connection"],
      [{ type: "turn.cancel", session_id: sb.session_id, turn_id: ask.turn_id }, "turn_not_found", "no running turn with this ID"],
      [{ type: "session.clear", session_id: sa.session_id }, "session_not_found", "no such session on this connection"],
      [{ type: "turn.start", session_id: sa.session_id, prompt: "hijack" }, "session_not_found", "no such session on this connection"],
      [{ type: "session.start", cwd: sa.cwd, resume: sa.session_id }, "invalid_request", "this connection already has a session (one session per connection)"],
    ];
    for (const [msg, code, message] of cases) {
      const r = await refusal(msg);
      assert.deepEqual([r.type, r.code, r.message, r.fatal], ["error", code, message, false], JSON.stringify(msg));
    }
    // a fresh connection may not take the session over either while A holds it
    const c = await d.connect();
    await c.initialize();
    const take = await c.reply(c.request({ type: "session.start", cwd: sa.cwd, resume: sa.session_id }), ["session.started"]);
    assert.deepEqual([take.code, take.message], ["invalid_request", "that session is in use by another connection or Berth process"]);
    c.end();
    // A's approval is still pending and still A's to answer
    assert.ok(!a.frames.some((m) => m.type === "tool.started"));
    a.request({ type: "approval.resolve", session_id: sa.session_id, approval_id: ask.approval_id, approved: false });
    const done = await a.waitFor((m) => m.type === "tool.completed" && m.call_id === "call_x");
    assert.deepEqual([done.success, done.error], [false, "denied"]);
    await a.waitFor((m) => m.type === "turn.completed" && m.turn_id === ask.turn_id);
    assert.equal(existsSync(marker), false);
    assert.deepEqual([a.seqErrors, b.seqErrors], [[], []]);
    a.end();
    b.end();
    await Promise.all([a.closed, b.closed, c.closed]);
  });

  it("a client that disappears mid-approval: its turn ends, the tool never runs, its session is released, others go on", async () => {
    const a = await d.connect();
    const sa = await a.open();
    const sid = sa.session_id as string;
    const marker = join(sa.cwd as string, "ran");
    await pendingApproval(a, sid, `touch ${marker}`);
    const other = await d.connect();
    const so = await other.open();
    (a.input as Socket).destroy();
    await a.closed;
    // The session is released once its cancelled turn has ended: resuming it then succeeds (wait for that, no sleep).
    let resumed: Msg | null = null;
    let r: ScvClient | null = null;
    for (let i = 0; i < 100 && resumed === null; i++) {
      r = await d.connect();
      await r.initialize();
      const m = await r.reply(r.request({ type: "session.start", cwd: sa.cwd, resume: sid }), ["session.started"]);
      if (m.type === "session.started") resumed = m;
      else {
        assert.equal(m.message, "that session is in use by another connection or Berth process");
        r.end();
        await r.closed;
        await other.reply(other.request({ type: "session.pause", session_id: so.session_id, paused: false }), ["session.paused"]);
      }
    }
    assert.ok(resumed !== null && r !== null, "the vanished client's session was released");
    assert.equal(resumed.session_id, sid);
    // nothing of the vanished turn runs later, and the resumed session serves a turn
    const t = await r.turn(sid, "after the crash");
    assert.equal(t.terminal.type, "turn.completed");
    assert.equal(existsSync(marker), false, "the unapproved command never ran");
    assert.ok(!r.frames.some((m) => m.type === "approval.requested"), "no approval of the old turn reaches the new client");
    const o = await other.turn(so.session_id as string, "still here");
    assert.equal(o.terminal.type, "turn.completed");
    assert.deepEqual([r.seqErrors, other.seqErrors], [[], []]);
    r.end();
    other.end();
    await Promise.all([r.closed, other.closed]);
  });

  it("a client that drops while its tool runs resumes at once: the resume waits for the release; a storm gets one", async () => {
    const a = await d.connect();
    const sa = await a.open();
    const sid = sa.session_id as string;
    const pidFile = join(sa.cwd as string, "pid");
    // A tool that ignores SIGTERM: the cancelled turn ends only at the bash tool's SIGKILL, after its grace.
    rig.fake.script([{ steps: [{ toolCall: { id: "call_s", name: "bash", arguments: { command: "trap '' TERM; echo $$ > pid; sleep 30" } } }] }]);
    const rid = a.request({ type: "turn.start", session_id: sid, prompt: "run it" });
    const ask = await a.waitFor((m) => m.request_id === rid && m.type === "approval.requested");
    a.request({ type: "approval.resolve", session_id: sid, approval_id: ask.approval_id, approved: true });
    await a.waitFor((m) => m.request_id === rid && m.type === "tool.started");
    await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "", "the tool's shell running");
    const pid = Number(readFileSync(pidFile, "utf8"));
    (a.input as Socket).destroy();
    await a.closed;

    // The client and a few stray retries of it reconnect at once: each resume waits for the ended connection's
    // release; exactly one gets the session, the others are told it is in use (by that one).
    const cs = await Promise.all([d.connect(), d.connect(), d.connect(), d.connect()]);
    await Promise.all(cs.map((c) => c.initialize()));
    const rids = cs.map((c) => c.request({ type: "session.start", cwd: sa.cwd, resume: sid }));
    const replies = await Promise.all(cs.map((c, i) => c.reply(rids[i]!, ["session.started"])));
    const won = replies.filter((m) => m.type === "session.started");
    assert.equal(won.length, 1, JSON.stringify(replies));
    assert.equal(won[0]!.session_id, sid);
    for (const m of replies.filter((x) => x.type !== "session.started")) assert.deepEqual([m.code, m.message], ["invalid_request", "that session is in use by another connection or Berth process"]);
    assert.equal(alive(pid), false, "the dropped turn's tool had stopped before the session was handed over");
    const r = cs[replies.indexOf(won[0]!)]!;
    rig.fake.script([{ steps: [{ text: "back" }] }]);
    const t = await r.turn(sid, "after the drop");
    assert.equal(t.terminal.type, "turn.completed");
    assert.match(String(rig.fake.requests.at(-1)!.body), /"tool_call_id":"call_s"/, "the model sees the dropped call's (cancelled) result");
    assert.ok(!r.frames.some((m) => m.type === "approval.requested" || m.call_id === "call_s"), "nothing of the dropped turn reaches the new client");
    assert.deepEqual(r.seqErrors, []);
    for (const c of cs) c.end();
    await Promise.all(cs.map((c) => c.closed));
  });
});
