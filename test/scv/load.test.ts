/**
 * Connection lifecycle under load: EOF on each transport cancels the running turn (the provider request is closed;
 * stdio exits 0, the daemon keeps serving); a slow socket reader holding the writer at capacity loses no event;
 * 30 concurrent socket clients each run a turn; SIGTERM with turns running stops the daemon (exit 0).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { spawnStdio, startDaemon, startRig, type Msg, type ScvClient } from "./client.js";

async function holdTurn(c: ScvClient, sid: string): Promise<string> {
  const from = c.frames.length;
  const rid = c.request({ type: "turn.start", session_id: sid, prompt: "hold" });
  await c.waitFor((m) => m.request_id === rid && m.type === "assistant.delta", from);
  return rid;
}

it("stdio: EOF cancels the running turn, closes its provider request, and exits 0", async () => {
  const rig = await startRig();
  const { client: c, exited } = spawnStdio(rig.env);
  const s = await c.open();
  rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
  const n = rig.fake.requests.length;
  const rid = await holdTurn(c, s.session_id as string);
  c.end();
  assert.equal(await exited, 0);
  await rig.fake.requests[n]!.socketClosed;
  // the terminal event was written before the process ended
  assert.ok(c.frames.some((m) => m.request_id === rid && m.type === "turn.cancelled"));
  assert.deepEqual(c.garbage, []);
  await rig.fake.close();
});

for (const sig of ["SIGTERM", "SIGHUP"] as const) {
  it(`stdio: ${sig} cancels the running turn, writes its terminal event, and exits 0`, async () => {
    const rig = await startRig();
    const { client: c, child, exited } = spawnStdio(rig.env);
    const s = await c.open();
    rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
    const rid = await holdTurn(c, s.session_id as string);
    child.kill(sig);
    assert.equal(await exited, 0);
    assert.ok(c.frames.some((m) => m.request_id === rid && m.type === "turn.cancelled"));
    await rig.fake.close();
  });
}

it("socket: SIGHUP (the daemon's terminal closed) stops the daemon like SIGTERM: turn cancelled, socket removed, exit 0", async () => {
  const rig = await startRig();
  const d = await startDaemon(rig.env);
  try {
    const c = await d.connect();
    const s = await c.open();
    rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
    const rid = await holdTurn(c, s.session_id as string);
    d.child.kill("SIGHUP");
    assert.equal(await d.exited, 0, d.stderr());
    assert.ok(c.frames.some((m) => m.request_id === rid && m.type === "turn.cancelled"));
    assert.equal(existsSync(d.socket), false, "the socket is removed");
  } finally {
    await d.stop();
    await rig.fake.close();
  }
});

it("socket: EOF cancels that connection's turn only; the daemon keeps serving; SIGTERM exits 0 with turns running", async () => {
  const rig = await startRig();
  const d = await startDaemon(rig.env);
  try {
    const a = await d.connect();
    const sa = await a.open();
    rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
    const n = rig.fake.requests.length;
    await holdTurn(a, sa.session_id as string);
    a.end();
    await rig.fake.requests[n]!.socketClosed;
    await a.closed;
    const b = await d.connect();
    const sb = await b.open();
    assert.equal((await b.turn(sb.session_id as string, "still here")).terminal.type, "turn.completed");
    // SIGTERM while a turn runs: bounded cancellation, exit 0
    rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
    await holdTurn(b, sb.session_id as string);
  } finally {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  }
});

it("socket: a slow reader holds the writer at capacity and still receives every event in order", async () => {
  const rig = await startRig();
  // The send timeout is raised so a busy machine cannot turn this slow reader into a stalled one.
  const d = await startDaemon({ ...rig.env, BERTH_SCV_SEND_TIMEOUT_MS: "120000" });
  try {
    const slow = await d.connect();
    const s = await slow.open();
    const sock = slow.input;
    const from = slow.frames.length;
    sock.pause();
    const rid = slow.request({ type: "turn.start", session_id: s.session_id, prompt: "long answer 20000" });
    // While the slow client reads nothing, the daemon keeps serving others (progress elsewhere, not a sleep).
    const other = await d.connect();
    const so = await other.open();
    await rig.fake.waitForRequests(1);
    for (let i = 0; i < 3; i++) assert.equal((await other.turn(so.session_id as string, `meanwhile ${i}`)).terminal.type, "turn.completed");
    sock.resume();
    const terminal = await slow.waitFor((m) => m.request_id === rid && m.type === "turn.completed", from);
    const deltas = slow.frames.filter((m: Msg) => m.request_id === rid && m.type === "assistant.delta");
    const completed = slow.frames.find((m: Msg) => m.request_id === rid && m.type === "assistant.completed")!;
    assert.equal(deltas.map((m) => m.content as string).join(""), completed.content);
    assert.equal((completed.content as string).length, "word ".length * 20000);
    assert.deepEqual(slow.seqErrors, []);
    assert.ok(terminal);
    for (const c of [slow, other]) {
      c.end();
      await c.closed;
    }
  } finally {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  }
});

it("socket: turn.cancel interrupts a turn blocked on a full writer; the terminal is turn.cancelled", async () => {
  const rig = await startRig();
  const d = await startDaemon({ ...rig.env, BERTH_SCV_SEND_TIMEOUT_MS: "120000" });
  try {
    const c = await d.connect();
    const s = await c.open();
    const n = rig.fake.requests.length;
    const from = c.frames.length;
    const rid = c.request({ type: "turn.start", session_id: s.session_id, prompt: "long answer 200000" });
    const started = await c.waitFor((m) => m.request_id === rid && m.type === "turn.started", from);
    c.input.pause();
    await rig.fake.waitForRequests(n + 1);
    // another client's full turn is progress elsewhere while this one reads nothing
    const other = await d.connect();
    const so = await other.open();
    await other.turn(so.session_id as string, "meanwhile");
    c.request({ type: "turn.cancel", session_id: s.session_id, turn_id: started.turn_id });
    await rig.fake.requests[n]!.socketClosed;
    c.input.resume();
    const end = await c.waitFor((m) => m.request_id === rid && ["turn.completed", "turn.cancelled", "turn.failed"].includes(m.type as string), from);
    assert.equal(end.type, "turn.cancelled");
    assert.deepEqual(c.seqErrors, []);
    for (const x of [c, other]) {
      x.end();
      await x.closed;
    }
  } finally {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  }
});

it("socket: 30 concurrent clients each run a turn to completion", async () => {
  const rig = await startRig();
  const d = await startDaemon(rig.env);
  try {
    const clients = await Promise.all(Array.from({ length: 30 }, () => d.connect()));
    const results = await Promise.all(
      clients.map(async (c, i) => {
        const s = await c.open();
        const r = await c.turn(s.session_id as string, `client ${i}`);
        const text = r.frames.filter((m) => m.type === "assistant.delta").map((m) => m.content as string).join("");
        c.end();
        await c.closed;
        return { type: r.terminal.type as string, text, seqErrors: c.seqErrors, terminal: r.terminal };
      }),
    );
    results.forEach((r, i) => {
      assert.equal(r.type, "turn.completed", JSON.stringify(r.terminal));
      assert.equal(r.text, `echo: client ${i}`);
      assert.deepEqual(r.seqErrors, []);
    });
  } finally {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  }
});

it("socket: a reader that stops reading is cut off after the send timeout; its turn is cancelled; others go on", async () => {
  const rig = await startRig();
  const d = await startDaemon({ ...rig.env, BERTH_SCV_SEND_TIMEOUT_MS: "200", BERTH_SCV_CLEANUP_GRACE_MS: "200" });
  try {
    const stuck = await d.connect();
    const s = await stuck.open();
    const sock = stuck.input;
    sock.pause();
    const n = rig.fake.requests.length;
    stuck.request({ type: "turn.start", session_id: s.session_id, prompt: "long answer 200000" });
    const [req] = (await rig.fake.waitForRequests(n + 1)).slice(n);
    await req!.socketClosed; // the provider stream was cancelled by the connection's cleanup
    sock.resume();
    await stuck.closed;
    const other = await d.connect();
    const so = await other.open();
    assert.equal((await other.turn(so.session_id as string, "fine")).terminal.type, "turn.completed");
    other.end();
    await other.closed;
  } finally {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  }
});
