/**
 * Turns through the spawned service against the loopback fake provider: size rule, crash recovery, bash
 * cancellation without orphans, MCP tools, subagents, compaction and provider read bounds.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PROVIDER_BOUNDS } from "../../src/runtime/types.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { fakeSettings, parsed, startRig, startTurn, waitTerminal, type Msg } from "./helpers.js";
import { pidExists } from "../helpers/run-child.js";

const MCP_FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

async function until<T>(what: string, f: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const terminalOf = (events: Msg[]): Msg => events.find((e) => e.event === "turn.terminal")!.payload;
const activities = (events: Msg[]): Msg[] => events.filter((e) => e.event === "turn.activity").map((e) => e.payload.activity);

function assertSequences(events: Msg[]): void {
  let last = -1;
  for (const e of events) {
    assert.ok(e.payload.sequence > last, "sequence increases");
    last = e.payload.sequence;
  }
  assert.equal(events.filter((e) => e.event === "turn.terminal").length, 1);
  assert.equal(events.at(-1)!.event, "turn.terminal");
}

describe("turns through the service", { concurrency: 3 }, () => {
  it("terminal-size check: 16,384 text bytes are accepted; one more byte fails the turn with the text so far @req AS-TURN-25", async () => {
    const at = "a".repeat(16 * 1024);
    const rig = await startRig({ fake: {} });
    try {
      rig.fake.script([{ steps: [{ text: at, chunks: 16 }] }, { steps: [{ text: at, chunks: 16 }, { text: "b" }] }, { steps: [{ text: '"'.repeat(16384), chunks: 64 }] }]);
      await startTurn(rig.svc, "one", "a1");
      let t = terminalOf(await waitTerminal(rig.svc, "a1"));
      assert.equal(t.status, "completed");
      assert.ok(t.assistant_text === at, "all 16,384 bytes accepted");
      await startTurn(rig.svc, "two", "a2");
      const ev = await waitTerminal(rig.svc, "a2");
      t = terminalOf(ev);
      assert.equal(t.status, "failed");
      assert.ok(t.assistant_text === at, "the refused delta is not part of the accepted text");
      assert.ok(ev.filter((e) => e.event === "turn.assistant_delta").map((e) => e.payload.text).join("") === at);
      assertSequences(ev);
      // Escaping: 16,384 quote characters would need 32,768 escaped bytes, past the terminal payload bound.
      await startTurn(rig.svc, "three", "a3");
      const ev3 = await waitTerminal(rig.svc, "a3");
      const t3 = terminalOf(ev3);
      assert.equal(t3.status, "failed");
      assert.ok(t3.assistant_text.length > 0 && t3.assistant_text.length < 16384);
      const line = rig.svc.lines.find((l) => l.includes('"turn.terminal"') && l.includes('"request_id":"a3"'))!;
      assert.ok(Buffer.byteLength(JSON.stringify(JSON.parse(line).payload)) <= 32768);
      assert.equal((await rig.svc.request("status", {})).error, null, "the service keeps running");
    } finally {
      await rig.close();
    }
  });

  it("SIGKILL mid-answer: replay after restart shows the user message and the partial text @req AS-TURN-31", async () => {
    const rig = await startRig();
    try {
      rig.fake.script([{ steps: [{ text: "first half of the answer" }, { waitForAbort: true }] }]);
      const res = await startTurn(rig.svc, "tell me", "k1");
      const sid = res.payload.session_id as string;
      await until("delta", () => parsed(rig.svc).some((m) => m.event === "turn.assistant_delta"));
      // Poll durable replay (read-only) until the partial segment is on disk (timer flush ≤ 250 ms).
      await until("partial persisted", async () => {
        const r = await rig.svc.request("session.replay", {}, { session_id: sid });
        return r.payload?.events?.some((e: Msg) => e.role === "assistant");
      });
      rig.svc.kill("SIGKILL");
      await rig.svc.exited;
      const again = new ServiceProcess({ home: rig.svc.home });
      try {
        await again.initialize();
        const r = await again.request("session.replay", {}, { session_id: sid });
        assert.deepEqual(
          r.payload.events.map((e: Msg) => [e.kind, e.role, e.text]),
          [
            ["message", "user", "tell me"],
            ["message", "assistant", "first half of the answer"],
          ],
        );
        // The interrupted session accepts a new turn (its history has a dangling message, no terminal).
        const t2 = await again.request("turn.start", { prompt: "continue" }, { session_id: sid }, "k2");
        assert.equal(t2.error, null);
        const ev = await waitTerminal(again, "k2");
        assert.equal(terminalOf(ev).status, "completed");
      } finally {
        again.end();
        await again.exited;
      }
    } finally {
      await rig.close();
    }
  });

  it("cancel during a bash tool kills its process group: no orphan remains @req AS-TURN-32", async () => {
    const rig = await startRig();
    try {
      rig.fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: "echo $$ > pid.txt; sleep 30 & echo $! > bg.txt; wait" } } }] }]);
      const res = await startTurn(rig.svc, "run it", "b1");
      const cwd = rig.svc.cwd!;
      const [pid, bg] = await until("pids written", () =>
        existsSync(join(cwd, "bg.txt")) && readFileSync(join(cwd, "bg.txt"), "utf8").trim() !== ""
          ? [Number(readFileSync(join(cwd, "pid.txt"), "utf8")), Number(readFileSync(join(cwd, "bg.txt"), "utf8"))]
          : undefined,
      );
      assert.ok(pidExists(pid) && pidExists(bg));
      const c = await rig.svc.request("turn.cancel", { turn_id: res.payload.turn_id }, {}, "b2");
      assert.equal(c.payload.status, "cancellation_requested");
      const ev = await waitTerminal(rig.svc, "b1");
      assert.equal(terminalOf(ev).status, "cancelled");
      await until("processes gone", () => !pidExists(pid) && !pidExists(bg), 5000);
      const tool = activities(ev).filter((a) => a.kind === "tool");
      assert.deepEqual(tool.map((a) => a.status), ["running", "failed"]);
      assert.equal(tool[1]!.tool_name, "bash");
      assert.equal(tool[1]!.timed_out, false);
      assert.ok(!rig.svc.lines.some((l) => l.includes("sleep 30") || l.includes("pid.txt")), "commands never reach the wire");
    } finally {
      await rig.close();
    }
  });

  it("an MCP tool runs end to end with hashed identities @req AS-TURN-33 @req AS-TURN-24", async () => {
    // The server's tools must be in the first request even on a loaded machine, where it can take longer than the
    // default 5 s to start (app-service reports no MCP server lifecycle to wait for instead).
    const rig = await startRig({
      settings: { mcp: { fixture: { command: process.execPath, args: [MCP_FIXTURE], env: {} } } },
      svc: { env: { BERTH_MCP_STARTUP_WAIT_MS: "600000" } },
    });
    try {
      rig.fake.script([{ steps: [{ toolCall: { id: "m1", name: "mcp__fixture__echo", arguments: { text: "SECRET-ARG" } } }] }, { steps: [{ text: "done" }] }]);
      await startTurn(rig.svc, "use mcp", "m1");
      const ev = await waitTerminal(rig.svc, "m1");
      assert.equal(terminalOf(ev).status, "completed");
      const tool = activities(ev).filter((a) => a.kind === "tool");
      assert.deepEqual(tool.map((a) => [a.status, a.transport, a.tool_name]), [
        ["running", "mcp", null],
        ["completed", "mcp", null],
      ]);
      assert.match(tool[0]!.server_id, /^mcp-server-[0-9a-f]{64}$/);
      assert.match(tool[0]!.tool_id, /^tool-[0-9a-f]{64}$/);
      // The provider saw the tool result; the wire never did.
      const second = rig.fake.requests[1]!.body;
      assert.ok(second.includes("echo: SECRET-ARG"));
      assert.ok(!rig.svc.lines.some((l) => l.includes("SECRET-ARG") || l.includes("fixture")));
    } finally {
      await rig.close();
    }
  });

  it("a task tool runs a subagent: batch/task lifecycle with parent links and aggregate usage @req AS-TURN-29", async () => {
    const rig = await startRig();
    try {
      rig.fake.script([
        { steps: [{ toolCall: { id: "t1", name: "task", arguments: { description: "look around", prompt: "child work" } } }] },
        { steps: [{ text: "child answer" }], usage: { input: 7, output: 3 } },
        { steps: [{ text: "parent done" }] },
      ]);
      await startTurn(rig.svc, "delegate", "s1");
      const ev = await waitTerminal(rig.svc, "s1");
      assert.equal(terminalOf(ev).status, "completed");
      assert.equal(terminalOf(ev).assistant_text, "parent done", "child text is not assistant text");
      const acts = activities(ev);
      const batch = acts.find((a) => a.category === "subagent_batch")!;
      const task = acts.find((a) => a.category === "subagent_task")!;
      assert.equal(batch.status, "running");
      assert.equal(task.parent_activity_id, batch.activity_id);
      assert.equal(batch.parent_activity_id, undefined);
      assert.match(task.activity_id, /^lifecycle-[0-9a-f]{64}$/);
      const agg = acts.find((a) => a.kind === "usage" && a.source === "subagent_aggregate")!;
      assert.equal(agg.output, 3);
      // Finishes of the subagent units (tool and assistant lifecycles finish too; see rules-activity.test.ts).
      const finishes = acts.filter((a) => a.kind === "lifecycle" && a.category === "activity" && [task.activity_id, batch.activity_id].includes(a.activity_id));
      assert.deepEqual(finishes.map((a) => [a.activity_id, a.status]), [
        [task.activity_id, "completed"],
        [batch.activity_id, "completed"],
      ]);
      assert.ok(String(rig.fake.requests[2]!.body).includes("child answer"), "the child's answer returns as the tool result");
      assertSequences(ev);
    } finally {
      await rig.close();
    }
  });

  it("compaction near the window: provider summary, checkpoint, compaction activity, summary in replay @req AS-TURN-30", async () => {
    const rig = await startRig();
    try {
      const r1 = await startTurn(rig.svc, "long answer 400", "c1");
      const sid = r1.payload.session_id as string;
      const ev1 = await waitTerminal(rig.svc, "c1");
      assert.equal(terminalOf(ev1).status, "completed");
      const e1 = activities(ev1).find((a) => a.kind === "context")!.current_tokens as number;
      // The second turn adds ~500 tokens of history: put its start estimate past 80% of the window.
      writeFileSync(join(rig.svc.home, "settings.json"), JSON.stringify(fakeSettings(rig.fake.baseUrl, { contextWindow: Math.round((e1 + 250) / 0.8) })));
      await startTurn(rig.svc, "next", "c2", sid);
      const ev2 = await waitTerminal(rig.svc, "c2");
      assert.equal(terminalOf(ev2).status, "completed");
      const comp = activities(ev2).filter((a) => a.kind === "compaction");
      assert.deepEqual(comp.map((a) => [a.status, a.replay_required]), [
        ["triggered", false],
        ["running", false],
        ["completed", true],
      ]);
      assert.ok(comp[0]!.current_tokens > 0 && comp[0]!.max_tokens > 0 && comp[1]!.current_tokens === null);
      const summaryReq = rig.fake.requests[1]!.body;
      assert.ok(summaryReq.includes("Summarize the conversation"));
      const turnReq = rig.fake.requests[2]!.body;
      assert.ok(turnReq.includes("Summary of the earlier conversation") && !turnReq.includes("word word word"));
      const rep = await rig.svc.request("session.replay", {}, { session_id: sid });
      const items = rep.payload.events as Msg[];
      assert.equal(items[0]!.kind, "summary");
      assert.deepEqual(items.slice(-3).map((e) => [e.kind, e.role ?? e.status]), [
        ["message", "user"],
        ["message", "assistant"],
        ["terminal", "completed"],
      ]);
    } finally {
      await rig.close();
    }
  });

  it("provider read bounds through the service: at the limit completes, one past fails @req AS-TURN-34", async () => {
    const B = PROVIDER_BOUNDS;
    const args = (bytes: number): string => `{"x":"${"a".repeat(bytes - 8)}"}`;
    const calls = (n: number) => Array.from({ length: n }, (_, i) => ({ toolCall: { id: `k${i}`, name: "nope", arguments: {} } }));
    const cases: Array<[string, object, object, boolean]> = [
      ["response", { steps: [{ text: "hi" }], totalBytes: B.maxResponseBytes }, { steps: [{ text: "hi" }], totalBytes: B.maxResponseBytes + 1 }, false],
      ["tool args", { steps: [{ toolCall: { id: "a", name: "nope", arguments: args(B.maxToolArgumentBytes), chunks: 8 } }] }, { steps: [{ toolCall: { id: "a", name: "nope", arguments: args(B.maxToolArgumentBytes + 1), chunks: 8 } }] }, true],
      ["tool calls", { steps: calls(B.maxToolCallsPerResponse) }, { steps: calls(B.maxToolCallsPerResponse + 1) }, true],
    ];
    const rig = await startRig();
    try {
      let n = 0;
      for (const [name, at, past, continues] of cases) {
        rig.fake.script(continues ? [at, { steps: [{ text: "ok" }] }] : [at]);
        await startTurn(rig.svc, name, `p${++n}`);
        const okEv = await waitTerminal(rig.svc, `p${n}`);
        assert.equal(terminalOf(okEv).status, "completed", `${name} at the limit`);
        rig.fake.script([past]);
        await startTurn(rig.svc, name, `p${++n}`);
        const bad = await waitTerminal(rig.svc, `p${n}`);
        assert.equal(terminalOf(bad).status, "failed", `${name} one past the limit`);
        assert.ok(!activities(bad).some((a) => a.kind === "tool" && a.status === "running"), "no call of a failed response runs");
      }
    } finally {
      await rig.close();
    }
  });
});
