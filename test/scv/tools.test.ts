/**
 * Tool lifecycle and approvals over both transports: a read-only tool runs without asking; a process tool asks
 * (UUID approval IDs, risk, cwd, summary), runs only after approval (tool.started after approval.requested),
 * completes with output; a denial completes success:false error:"denied" and the model sees a denial; cancelling
 * while an approval is pending ends the call `cancelled` and the turn `turn.cancelled`, and the withdrawn approval
 * is unknown afterwards; unknown / repeated approval IDs are approval_not_found.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TRANSPORTS, type Msg, type Rig, type ScvClient } from "./client.js";
import { useRig } from "./rig.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function toolTurn(rig: Rig, id: string, name: string, args: Record<string, unknown>): void {
  rig.fake.script([{ steps: [{ toolCall: { id, name, arguments: args } }] }]);
}

function startTurn(c: ScvClient, sid: string, prompt: string): { rid: string; from: number } {
  const from = c.frames.length;
  return { rid: c.request({ type: "turn.start", session_id: sid, prompt }), from };
}

const types = (c: ScvClient, rid: string): string[] => c.frames.filter((m) => m.request_id === rid).map((m) => m.type as string);

for (const name of TRANSPORTS) {
  describe(`scv tools and approvals over ${name}`, () => {
    const suite = useRig(name);

    it("runs a read-only tool without asking", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      toolTurn(suite.rig, "call_ls", "ls", {});
      const { terminal } = await c.turn(s.session_id as string, "list");
      assert.equal(terminal.type, "turn.completed");
      const seq = types(c, terminal.request_id as string);
      assert.ok(!seq.includes("approval.requested"));
      const done = c.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_ls")!;
      assert.equal(done.success, true);
      assert.equal(done.truncated, false);
      assert.ok(!("error" in done));
      assert.ok(seq.indexOf("tool.proposed") < seq.indexOf("tool.started"));
      c.end();
      await c.closed;
    });

    it("confines file tools to the session's workspace and keeps Berth's state unreadable (tool policy)", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const outside = join(mkdtempSync(join(tmpdir(), "scv-outside-")), "secret.txt");
      writeFileSync(outside, "outside-the-workspace");
      for (const [id, path, reason] of [
        ["call_out", outside, /outside the session's workspace/],
        ["call_state", join(suite.rig.home, "settings.json"), /Berth's state directory is not readable by tools/],
      ] as const) {
        toolTurn(suite.rig, id, "read", { path });
        const { terminal } = await c.turn(s.session_id as string, "read it");
        assert.equal(terminal.type, "turn.completed");
        const done = c.frames.find((m) => m.type === "tool.completed" && m.call_id === id)!;
        assert.equal(done.success, false);
        assert.match(done.output as string, reason);
        assert.doesNotMatch(done.output as string, /outside-the-workspace|baseUrl|providers/);
      }
      c.end();
      await c.closed;
    });

    it("asks before a process tool, runs it only once approved, and rejects a second answer", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      toolTurn(suite.rig, "call_ok", "bash", { command: "echo approved-run" });
      const { rid, from } = startTurn(c, sid, "run it");
      const ask = await c.waitFor((m) => m.request_id === rid && m.type === "approval.requested", from);
      assert.match(ask.approval_id as string, UUID);
      assert.equal(ask.call_id, "call_ok");
      assert.equal(ask.name, "bash");
      assert.equal(ask.risk, "process");
      assert.equal(ask.cwd, s.cwd);
      assert.equal(ask.summary, "Run shell command: echo approved-run");
      const proposed = c.frames.find((m) => m.request_id === rid && m.type === "tool.proposed")!;
      assert.deepEqual(proposed.arguments, { command: "echo approved-run" });
      assert.ok(!types(c, rid).includes("tool.started"), "nothing starts before approval");
      c.request({ type: "approval.resolve", session_id: sid, approval_id: ask.approval_id, approved: true });
      const done = await c.waitFor((m) => m.request_id === rid && m.type === "tool.completed", from);
      assert.equal(done.success, true);
      assert.match(done.output as string, /approved-run/);
      const terminal = await c.waitFor((m) => m.request_id === rid && m.type === "turn.completed", from);
      const seq = types(c, rid);
      assert.ok(seq.indexOf("tool.proposed") < seq.indexOf("approval.requested"));
      assert.ok(seq.indexOf("approval.requested") < seq.indexOf("tool.started"));
      assert.equal(seq.at(-1), "turn.completed");
      assert.equal(terminal.steps, 2);
      // progress: display lines only between tool.started and tool.completed, each event ≤ 512 bytes
      const progress = c.frames.filter((m) => m.request_id === rid && m.type === "tool.progress");
      assert.ok(progress.length >= 1, "bash reports that it runs");
      assert.equal(progress[0]!.text, "running");
      for (const p of progress) {
        assert.equal(p.call_id, "call_ok");
        assert.ok(Buffer.byteLength(p.text as string) <= 512);
        assert.ok(seq.indexOf("tool.started") < c.frames.filter((m) => m.request_id === rid).indexOf(p));
        assert.ok(c.frames.indexOf(p) < c.frames.indexOf(done));
      }
      // an approval.resolve succeeds silently: no frame answered it; a repeat is approval_not_found
      const again = c.request({ type: "approval.resolve", session_id: sid, approval_id: ask.approval_id, approved: true });
      assert.equal((await c.reply(again, [])).code, "approval_not_found");
      const unknown = c.request({ type: "approval.resolve", session_id: sid, approval_id: "00000000-0000-4000-8000-000000000000", approved: false });
      assert.equal((await c.reply(unknown, [])).code, "approval_not_found");
      c.end();
      await c.closed;
    });

    it("completes a denied call with success:false, error denied, and tells the model", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      toolTurn(suite.rig, "call_no", "bash", { command: "echo never" });
      const n = suite.rig.fake.requests.length;
      const { rid, from } = startTurn(c, sid, "try it");
      const ask = await c.waitFor((m) => m.request_id === rid && m.type === "approval.requested", from);
      c.request({ type: "approval.resolve", session_id: sid, approval_id: ask.approval_id, approved: false });
      const done = await c.waitFor((m) => m.request_id === rid && m.type === "tool.completed", from);
      assert.equal(done.success, false);
      assert.equal(done.error, "denied");
      assert.ok(!types(c, rid).includes("tool.started"));
      await c.waitFor((m) => m.request_id === rid && m.type === "turn.completed", from);
      const followUp = JSON.stringify(suite.rig.fake.requests[n + 1]!.json);
      assert.match(followUp, /denied/i);
      assert.ok(!followUp.includes("never\\n"));
      c.end();
      await c.closed;
    });

    it("takes approval_policy from settings: never runs bash unasked, always asks even for ls", async () => {
      const path = join(suite.rig.home, "settings.json");
      const original = readFileSync(path, "utf8");
      const withPolicy = (p: string): void => writeFileSync(path, JSON.stringify({ ...(JSON.parse(original) as object), approval_policy: p }));
      try {
        withPolicy("never");
        const c = await suite.t.open();
        const s = await c.open();
        toolTurn(suite.rig, "call_never", "bash", { command: "echo unasked" });
        const r = await c.turn(s.session_id as string, "go");
        assert.equal(r.terminal.type, "turn.completed");
        assert.ok(!types(c, r.requestId).includes("approval.requested"));
        assert.equal(c.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_never")!.success, true);
        c.end();
        await c.closed;
        withPolicy("always");
        const c2 = await suite.t.open();
        const s2 = await c2.open();
        toolTurn(suite.rig, "call_always", "ls", {});
        const { rid, from } = startTurn(c2, s2.session_id as string, "list");
        const ask = await c2.waitFor((m) => m.request_id === rid && m.type === "approval.requested", from);
        assert.equal(ask.risk, "read_only");
        c2.request({ type: "approval.resolve", session_id: s2.session_id, approval_id: ask.approval_id, approved: true });
        await c2.waitFor((m) => m.request_id === rid && m.type === "turn.completed", from);
        c2.end();
        await c2.closed;
      } finally {
        writeFileSync(path, original);
      }
    });

    it("cancel while an approval is pending ends the call cancelled and withdraws the approval", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      toolTurn(suite.rig, "call_wait", "bash", { command: "echo pending" });
      const { rid, from } = startTurn(c, sid, "wait");
      const ask = await c.waitFor((m) => m.request_id === rid && m.type === "approval.requested", from);
      c.request({ type: "turn.cancel", session_id: sid, turn_id: ask.turn_id });
      const end = await c.waitFor((m) => m.request_id === rid && m.type.startsWith("turn.") && m.type !== "turn.started", from);
      assert.equal(end.type, "turn.cancelled");
      const call = c.frames.find((m: Msg) => m.request_id === rid && m.type === "tool.completed");
      if (call !== undefined) {
        assert.equal(call.success, false);
        assert.equal(call.error, "cancelled");
      }
      assert.ok(!types(c, rid).includes("tool.started"));
      const late = c.request({ type: "approval.resolve", session_id: sid, approval_id: ask.approval_id, approved: true });
      assert.equal((await c.reply(late, [])).code, "approval_not_found");
      const gone = c.request({ type: "turn.cancel", session_id: sid, turn_id: ask.turn_id });
      assert.equal((await c.reply(gone, [])).code, "turn_not_found");
      // the session goes on
      const next = await c.turn(sid, "after");
      assert.equal(next.terminal.type, "turn.completed");
      assert.deepEqual(c.seqErrors, []);
      c.end();
      await c.closed;
    });
  });
}
