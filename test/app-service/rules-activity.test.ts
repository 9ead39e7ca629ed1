/**
 * App-service activity rules end to end through the spawned service (issue 20 §8): a verified reasoning summary,
 * an unknown tool, a timed-out tool, and the generic lifecycle categories and statuses the runtime reports
 * (`tool` queued → running → finish, `assistant` writing, `compaction`).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { turnMethods, type TurnRunner } from "../../src/protocols/app-service/turns.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { serverWithServiceMethods } from "../helpers/app-service-server.js";
import { fakeSettings, startRig, startTurn, waitTerminal, type Msg } from "../turns/helpers.js";

const activities = (events: Msg[]): Msg[] => events.filter((e) => e.event === "turn.activity").map((e) => e.payload.activity);

describe("activity rules", { concurrency: 2 }, () => {
  it("verified reasoning summary, unknown tool, timed-out tool and tool/assistant lifecycles @req AS-ACT-01 @req AS-ACT-02 @req AS-ACT-03 @req AS-ACT-04", async () => {
    const rig = await startRig({ settings: { api: "anthropic" } });
    try {
      rig.fake.script([
        {
          steps: [
            { thinking: "I should inspect the tree", signature: "sig-abc" },
            // An unsigned thinking block is not a verified summary and is not projected.
            { thinking: "unverified musing" },
            { text: "Let me look." },
            { toolCall: { id: "u1", name: "no_such_tool", arguments: {} } },
            { toolCall: { id: "b1", name: "bash", arguments: { command: "sleep 30", timeout: 0.2 } } },
          ],
        },
        { steps: [{ text: "All done." }] },
      ]);
      await startTurn(rig.svc, "look around", "t1");
      const ev = await waitTerminal(rig.svc, "t1");
      assert.equal(ev.at(-1)!.payload.status, "completed");
      const acts = activities(ev);
      const summaries = acts.filter((a) => a.kind === "reasoning_summary");
      assert.deepEqual(summaries, [{ activity_id: summaries[0]!.activity_id, kind: "reasoning_summary", text: "I should inspect the tree", redacted: false, truncated: false }]);
      const tools = acts.filter((a) => a.kind === "tool");
      const unknown = tools.filter((a) => a.transport === "unknown");
      assert.equal(unknown.length, 1, "the unknown tool never starts: one result");
      assert.deepEqual(
        { tool_name: unknown[0]!.tool_name, server_id: unknown[0]!.server_id, status: unknown[0]!.status, timed_out: unknown[0]!.timed_out },
        { tool_name: null, server_id: null, status: "failed", timed_out: null },
      );
      const bash = tools.filter((a) => a.tool_name === "bash");
      assert.deepEqual(
        bash.map((a) => [a.status, a.timed_out]),
        [
          ["running", null],
          ["failed", true],
        ],
      );
      // Lifecycles: each tool call queued → (running) → finished; the assistant was writing before its first delta.
      const life = acts.filter((a) => a.kind === "lifecycle");
      const byId = new Map<string, Msg[]>();
      for (const a of life) byId.set(a.activity_id, [...(byId.get(a.activity_id) ?? []), a]);
      const seqs = [...byId.values()].map((xs) => xs.map((a) => `${a.category}:${a.status}`));
      assert.deepEqual(
        seqs.filter((s) => s[0]!.startsWith("tool")),
        [
          ["tool:queued", "activity:failed"],
          ["tool:queued", "tool:running", "activity:failed"],
        ],
      );
      assert.deepEqual(
        seqs.filter((s) => s[0]!.startsWith("assistant")),
        [
          ["assistant:writing", "activity:completed"],
          ["assistant:writing", "activity:completed"],
        ],
      );
      for (const a of life) assert.equal(a.details_omitted, true);
      // The writing lifecycle precedes the first delta of its response.
      const firstDelta = ev.findIndex((e) => e.event === "turn.assistant_delta");
      const firstWriting = ev.findIndex((e) => e.event === "turn.activity" && e.payload.activity.category === "assistant");
      assert.ok(firstWriting >= 0 && firstWriting < firstDelta);
      assert.ok(!JSON.stringify(ev).includes("unverified musing"));
      assert.ok(!JSON.stringify(ev).includes("no_such_tool"), "an unknown tool's name is never shown");
    } finally {
      await rig.close();
    }
  });

  it("compaction reports a generic compaction lifecycle beside the compaction activity @req AS-ACT-05", async () => {
    const rig = await startRig();
    try {
      const r1 = await startTurn(rig.svc, "long answer 400", "c1");
      const sid = r1.payload.session_id as string;
      const ev1 = await waitTerminal(rig.svc, "c1");
      const e1 = activities(ev1).find((a) => a.kind === "context")!.current_tokens as number;
      writeFileSync(join(rig.svc.home, "settings.json"), JSON.stringify(fakeSettings(rig.fake.baseUrl, { contextWindow: Math.round((e1 + 250) / 0.8) })));
      await startTurn(rig.svc, "next", "c2", sid);
      const ev2 = await waitTerminal(rig.svc, "c2");
      assert.equal(ev2.at(-1)!.payload.status, "completed");
      const acts = activities(ev2);
      const compLife = acts.filter((a) => a.kind === "lifecycle" && (a.category === "compaction" || (a.category === "activity" && acts.some((b) => b.category === "compaction" && b.activity_id === a.activity_id))));
      assert.deepEqual(
        compLife.map((a) => `${a.category}:${a.status}`),
        ["compaction:queued", "compaction:running", "activity:completed"],
      );
      assert.ok(compLife.every((a) => a.current_tokens === undefined), "generic lifecycle carries no compaction fields");
    } finally {
      await rig.close();
    }
  });
});

describe("cancel race", () => {
  it("a completion that wins the race against turn.cancel reports completed with its text @req AS-ACT-06", async () => {
    // In-process: the real turns family and session store, with a runner whose work is already complete when
    // the cancellation reaches it (the runtime cannot show this window from outside: it is the terminal write).
    const home = mkdtempSync(join(tmpdir(), "berth-race-"));
    const manager = new SessionManager(new SessionStore({ home }));
    let sawAbort = false;
    const runner: TurnRunner = {
      async runTurn(req) {
        await req.sink.delta("the whole answer");
        await new Promise<void>((resolve) => req.signal.addEventListener("abort", () => resolve(), { once: true }));
        sawAbort = true;
        await req.writer?.append({ kind: "terminal", turn_id: req.turnId, status: "completed", assistant_text: "the whole answer" }, { sync: true });
        return { status: "completed", assistantText: "the whole answer", usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 1 } };
      },
      close: () => Promise.resolve(),
    };
    const input = new PassThrough();
    const lines: string[] = [];
    let buf = "";
    const output = new Writable({
      write(chunk: Buffer, _e, cb) {
        buf += chunk.toString("utf8");
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          lines.push(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
        cb();
      },
    });
    const server = serverWithServiceMethods(input, output, [turnMethods({ manager, runner, cwd: home })]);
    const done = server.run();
    const all = (): Msg[] => lines.map((l) => JSON.parse(l) as Msg);
    const until = async <T>(f: () => T | undefined): Promise<T> => {
      for (;;) {
        const v = f();
        if (v !== undefined) return v;
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const send = (id: string, method: string, payload: unknown): void =>
      void input.write(JSON.stringify({ protocol_version: 1, kind: "request", request_id: id, method, payload }) + "\n");
    send("init", "initialize", { supported_protocol_versions: [1] });
    send("t", "turn.start", { prompt: "go" });
    const accepted = await until(() => all().find((m) => m.kind === "response" && m.request_id === "t"));
    await until(() => all().find((m) => m.event === "turn.assistant_delta"));
    send("c", "turn.cancel", { turn_id: accepted.payload.turn_id });
    const terminal = await until(() => all().find((m) => m.event === "turn.terminal"));
    assert.equal(sawAbort, true, "the cancellation reached the runner");
    assert.equal(all().find((m) => m.request_id === "c")?.payload.status, "cancellation_requested");
    assert.deepEqual([terminal.payload.status, terminal.payload.assistant_text], ["completed", "the whole answer"]);
    input.end();
    assert.equal(await done, 0);
  });
});
