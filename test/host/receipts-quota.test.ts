/**
 * `paratenic/dispatchOutcome` lookups of managed (v10) receipts, and the v13 operator session content quota
 * (spec: "Existing dispatch receipts expose terminal removal or rejection; receipt lookups may enqueue a coalesced
 * original-ticket GET, never a wake POST"; "Decoding is bounded only by an operator-configured session content
 * quota, if one is set"). Fake backends over the real socket, an AHP client over the real WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { startHost } from "../../src/protocols/host/host.js";

const user = (text: string) => ({ text, origin: { kind: "user" } });
const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });
const commands = (be: FakeBackend, type: string) => be.frames.filter((f) => f.type === "command" && f.command.type === type);

test("managed receipts: pending, accepted with a coalesced read-only re-observation, rejected, and resolved after terminal removal", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 10, sourceId: "rcpt", instanceId: "i1", provider: "pi", chatCapabilities: { managedInvocations: true } });
    assert.equal(reg.type, "registered");
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
    const lookup = async (clientSeq: number, extra: Json = {}) => c.request("paratenic/dispatchOutcome", { channel: reg.chat, clientSeq, ...extra });

    const seq = c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "t1", message: user("hello") });
    const prompt = await be.next((f) => f.type === "command" && f.command.type === "managed_prompt");
    const pending = await lookup(seq);
    assert.equal(pending.result.outcome, "pending");
    assert.deepEqual(pending.result.action, { type: "chat/turnStarted", turnId: "t1" });
    assert.deepEqual(pending.result.invocation, { commandId: prompt.commandId, resolved: false });
    await be.roundTrip();
    assert.equal(commands(be, "observe_invocation").length, 0, "a pending command is not re-observed");

    be.send({ type: "command_result", commandId: prompt.commandId, accepted: true });
    await be.roundTrip();
    const accepted = await lookup(seq);
    assert.equal(accepted.result.outcome, "accepted");
    assert.equal(accepted.result.invocation.resolved, false);
    // The lookup asked the connector to re-observe the original invocation; a second lookup while that is in flight does not.
    const obs = await be.next((f) => f.type === "command" && f.command.type === "observe_invocation");
    assert.deepEqual(obs.command, { type: "observe_invocation", invocationCommandId: prompt.commandId, turnId: "t1" });
    await lookup(seq);
    await be.roundTrip();
    assert.equal(commands(be, "observe_invocation").length, 0, "coalesced: one observation in flight");
    be.send({ type: "command_result", commandId: obs.commandId, accepted: true });
    await be.roundTrip();

    // The same lookup by explicit clientId; an unknown sequence is not tracked.
    assert.equal((await lookup(seq, { clientId: "c1" })).result.outcome, "accepted");
    const again = await be.next((f) => f.type === "command" && f.command.type === "observe_invocation");
    be.send({ type: "command_result", commandId: again.commandId, accepted: true });
    assert.equal((await lookup(999)).error.code, -32008);

    // A follow-up the connector refuses: the receipt exposes the rejection.
    const qseq = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("later") });
    const fu = await be.next((f) => f.type === "command" && f.command.type === "managed_follow_up");
    be.send({ type: "command_result", commandId: fu.commandId, accepted: false, error: "queue closed" });
    await c.action((e) => e.origin?.clientSeq === qseq && e.rejectionReason !== undefined);
    const rejected = await lookup(qseq);
    assert.equal(rejected.result.outcome, "rejected");
    assert.deepEqual(rejected.result.action, { type: "chat/pendingMessageSet", kind: "queued", id: "q1" });

    // Terminal removal: the outcome and native retirement settle the turn, the record leaves the ledger.
    be.send(ev(reg, { type: "invocation_outcome", commandId: prompt.commandId, target: { turnId: "t1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    be.send(ev(reg, { type: "invocation_boundary", commandId: prompt.commandId, phase: "retired" }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "t1");
    const done = await lookup(seq);
    assert.deepEqual(done.result.invocation, { commandId: prompt.commandId, resolved: true, outcome: "succeeded" });
    await be.roundTrip();
    assert.equal(commands(be, "observe_invocation").length, 0, "a resolved invocation is not re-observed");
    // Nothing was ever resent.
    assert.equal(commands(be, "managed_prompt").length, 0);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("managed receipts survive a host restart through the checkpointed ledger (indeterminate until proven)", async () => {
  const home = tempHome();
  let reg: Json = {};
  let seq = 0;
  let commandId = "";
  await withHost(
    async (h) => {
      const first = await FakeBackend.session(h, { protocolVersion: 10, sourceId: "rcpt2", instanceId: "i1", provider: "pi", chatCapabilities: { managedInvocations: true } });
      reg = first.reg;
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat], "c1");
      seq = c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "t1", message: user("hello") });
      const prompt = await first.be.next((f) => f.type === "command" && f.command.type === "managed_prompt");
      commandId = prompt.commandId as string;
      first.be.send({ type: "command_result", commandId, accepted: true });
      await first.be.roundTrip();
      c.close();
      first.be.close();
    },
    { home },
  );
  await withHost(
    async (h) => {
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat], "c1");
      const r = await c.request("paratenic/dispatchOutcome", { channel: reg.chat, clientSeq: seq });
      assert.equal(r.result.outcome, "indeterminate");
      assert.deepEqual(r.result.invocation, { commandId, resolved: false });
      assert.deepEqual(c.invalid, []);
      c.close();
    },
    { home },
  );
});

function resources(session: string, text: string, parts: number): Json[] {
  const size = Math.ceil(text.length / parts);
  const out: Json[] = [];
  for (let i = 0; i < parts; i++) {
    const chunk = text.slice(i * size, (i + 1) * size);
    out.push({ session, index: i, mimeType: "text/plain", digest: `sha256:${createHash("sha256").update(chunk, "utf8").digest("hex")}`, text: chunk });
  }
  return out;
}

test("v13: an operator session content quota bounds a resource-carried snapshot's decoded size (at the quota and one byte past)", async () => {
  const snapshot = (id: string, n: number) =>
    JSON.stringify({ sourceId: "q13", active: false, historyOnly: true, turn: { id, startedAt: "2026-12-01T10:00:00.000Z", userText: "q", responseText: "é".repeat(n) } });
  const quota = Buffer.byteLength(snapshot("ta", 1000), "utf8");
  assert.equal(Buffer.byteLength(snapshot("tb", 1000), "utf8"), quota);
  const h = await startHost({ home: tempHome(), log: () => {}, sessionContentQuota: quota + 1 });
  try {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 13, sourceId: "q13" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
    const envelope = { type: "source_turn_resources", sourceId: "q13", active: false, historyOnly: true };
    // One byte past the quota (a two-byte character more than one byte under it): refused, nothing published.
    assert.equal(Buffer.byteLength(snapshot("ta", 1001), "utf8"), quota + 2);
    be.send(ev(reg, { ...envelope, resources: resources(reg.session, snapshot("ta", 1001), 3) }));
    const err = await be.nextType("error");
    assert.match(err.message, new RegExp(`session content quota of ${quota + 1} bytes`));
    assert.equal(c.actions(reg.chat).length, 0, "no partial turn was published");
    // One byte under the quota, and exactly at it: accepted whole.
    be.send(ev(reg, { ...envelope, resources: resources(reg.session, snapshot("tb", 1000), 3) }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "tb");
    const atQuota = snapshot("tc", 1000).replace('"q"', '"qq"');
    assert.equal(Buffer.byteLength(atQuota, "utf8"), quota + 1);
    be.send(ev(reg, { ...envelope, resources: resources(reg.session, atQuota, 2) }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "tc");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  } finally {
    await h.close();
  }
});

test("berth daemon refuses a session content quota that is not a positive number of bytes", () => {
  const bin = fileURLToPath(new URL("../../../bin/berth", import.meta.url));
  for (const bad of ["0", "-1", "12kb", ""]) {
    const r = spawnSync(process.execPath, [bin, "daemon", "--session-content-quota", bad], { env: { PATH: process.env.PATH, HOME: tempHome() }, encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
    assert.match(r.stderr, /--session-content-quota needs a positive number of bytes/);
  }
});
