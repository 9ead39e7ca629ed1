/**
 * The daemon's session cap (docs/scv.md "Limits"): one process holds at most MAX_RUNNING_SESSIONS (256) sessions at
 * once, one per connection. At the cap every `session.start` is accepted; one past it, a new session and a resumed
 * one are both refused `invalid_request` with a message naming the cap and the fix, nothing is created or taken, the
 * refused connection goes on serving, and once another connection ends the same connection starts (resumes) the
 * session with its history intact. Driven through a spawned `berth daemon` over real socket connections.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_RUNNING_SESSIONS } from "../../src/cli/scv-deps.js";
import { startDaemon, startRig, type ScvClient } from "./client.js";

const CAP_MESSAGE = `this server already holds ${MAX_RUNNING_SESSIONS} sessions, its limit (one per connection); end another connection's session, or connect to another Berth process, and send session.start again`;

it(`the daemon holds ${MAX_RUNNING_SESSIONS} sessions; one more (new or resumed) is invalid_request naming the cap; the connection goes on`, { timeout: 180_000 }, async () => {
  const rig = await startRig();
  const d = await startDaemon(rig.env);
  const cwd = mkdtempSync(join(tmpdir(), "scv-cap-"));
  const sessionFiles = (): string[] => readdirSync(join(rig.home, "sessions")).filter((f) => f.endsWith(".jsonl")).sort();
  const open: ScvClient[] = [];
  try {
    // A stored session from a connection that has ended: the resume candidate.
    const first = await d.connect();
    const stored = (await first.open({}, cwd)).session_id as string;
    assert.equal((await first.turn(stored, "remember the word heron")).terminal.type, "turn.completed");
    first.end();
    await first.closed;

    for (let i = 0; i < MAX_RUNNING_SESSIONS; i += 32) {
      const batch = await Promise.all(Array.from({ length: Math.min(32, MAX_RUNNING_SESSIONS - i) }, () => d.connect()));
      await Promise.all(batch.map((c) => c.open({}, cwd)));
      open.push(...batch);
    }
    assert.equal(open.length, MAX_RUNNING_SESSIONS, "every session up to the cap is accepted");
    const filesAtCap = sessionFiles();

    const x = await d.connect();
    await x.initialize();
    const fresh = await x.reply(x.request({ type: "session.start", cwd }), ["session.started"]);
    assert.deepEqual(fresh, { type: "error", request_id: fresh.request_id, code: "invalid_request", message: CAP_MESSAGE, fatal: false });
    const resumed = await x.reply(x.request({ type: "session.start", cwd, resume: stored }), ["session.started"]);
    assert.deepEqual(resumed, { type: "error", request_id: resumed.request_id, code: "invalid_request", message: CAP_MESSAGE, fatal: false });
    assert.deepEqual(sessionFiles(), filesAtCap, "a refused session.start creates no session");

    // The refused connection still serves requests.
    const status = await x.reply(x.request({ type: "daemon.control", command: { action: "status" } }), ["daemon.status"]);
    assert.equal(status.type, "daemon.status");

    // Another connection ends: its slot is free once the server has released that session (after the socket closed,
    // asynchronously: its lease let go), and the same connection then resumes. Asked again while still refused.
    const leaving = open.shift()!;
    leaving.end();
    await leaving.closed;
    let s = await x.reply(x.request({ type: "session.start", cwd, resume: stored }), ["session.started"]);
    for (let i = 0; i < 1000 && s.type === "error" && s.message === CAP_MESSAGE; i++) {
      await new Promise((r) => setTimeout(r, 10));
      s = await x.reply(x.request({ type: "session.start", cwd, resume: stored }), ["session.started"]);
    }
    assert.equal(s.type, "session.started", JSON.stringify(s));
    assert.equal(s.session_id, stored);
    const n = rig.fake.requests.length;
    assert.equal((await x.turn(stored, "which word?")).terminal.type, "turn.completed");
    assert.ok(JSON.stringify(rig.fake.requests[n]!.json).includes("remember the word heron"), "the resumed session kept its history");
    assert.deepEqual(x.seqErrors, []);
    x.end();
    await x.closed;
  } finally {
    for (const c of open) c.end();
    await Promise.all(open.map((c) => c.closed));
    await d.stop();
    await rig.fake.close();
  }
});
