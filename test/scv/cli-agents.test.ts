/**
 * `agent_codex` against a fake `codex` executable that speaks Codex's real `exec --json` event stream
 * (thread.started, turn.started, item.started/completed with command_execution, file_change and agent_message
 * items, turn.completed with usage) and honours `-o <file>` and `resume <thread> -`: the fixed argument vector,
 * the prompt on stdin, the private CODEX_HOME, API keys withheld, SCV_PARENT set, progress lines from the events,
 * the structured result, and a resumed conversation.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { spawnStdio, startRig, type Msg, type ScvClient } from "./client.js";

const FAKE_CODEX = `#!${process.execPath}
const args = process.argv.slice(2);
const out = args[args.indexOf("-o") + 1];
const cwd = args[args.indexOf("-C") + 1];
const r = args.indexOf("resume");
const resumed = r >= 0 ? args[r + 1] : "none";
const ok = args[0] === "exec" && args[1] === "--json" && args[args.length - 1] === "-";
let prompt = "";
process.stdin.on("data", (d) => (prompt += d));
process.stdin.on("end", () => {
  const e = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
  const thread = resumed === "none" ? "0199a213-81c0-7800-8aa1-bbab2a035a53" : resumed;
  e({ type: "thread.started", thread_id: thread });
  e({ type: "turn.started" });
  e({ type: "item.started", item: { id: "item_1", type: "command_execution", command: "bash -lc 'cargo test' OPENAI_API_KEY=sk-leaky0123456789abcdef", aggregated_output: "", exit_code: null, status: "in_progress" } });
  e({ type: "item.completed", item: { id: "item_1", type: "command_execution", command: "bash -lc 'cargo test'", aggregated_output: "ok", exit_code: 0, status: "completed" } });
  e({ type: "item.completed", item: { id: "item_2", type: "file_change", changes: [{ path: "src/lib.rs", kind: "update" }], status: "completed" } });
  const reply = [ok ? "argv ok" : "argv bad: " + args.join(" "), "prompt=" + prompt, "cwd=" + cwd, "key=" + (process.env.OPENAI_API_KEY ?? "none"), "home=" + process.env.CODEX_HOME, "parent=" + (process.env.SCV_PARENT ?? "none"), "depth=" + process.env.SCV_DELEGATION_DEPTH, "resumed=" + resumed].join("|");
  e({ type: "item.completed", item: { id: "item_3", type: "agent_message", text: "streamed " + reply } });
  require("fs").writeFileSync(out, reply);
  e({ type: "turn.completed", usage: { input_tokens: 1200, cached_input_tokens: 200, output_tokens: 34 } });
});
`;

async function approveNext(c: ScvClient, from: number): Promise<void> {
  const a = await c.waitFor((m) => m.type === "approval.requested", from, "approval.requested");
  c.request({ type: "approval.resolve", session_id: a.session_id, approval_id: a.approval_id, approved: true });
}

it("agent_codex runs the Codex CLI with a fixed argv and a private home, and resumes by thread", async () => {
  const rig = await startRig();
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-"));
  writeFileSync(join(bin, "codex"), FAKE_CODEX);
  chmodSync(join(bin, "codex"), 0o755);
  const cwd = mkdtempSync(join(tmpdir(), "codex-ws-"));
  const { client: c, exited } = spawnStdio({ ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}`, OPENAI_API_KEY: "sk-parent-secret-0123456789" });
  try {
    const s = await c.open({}, cwd);
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_x", name: "agent_codex", arguments: { prompt: "fix the test" } } }] },
      { steps: [{ text: "done" }] },
      { steps: [{ toolCall: { id: "call_y", name: "agent_codex", arguments: { prompt: "and again", session: "codex-1", effort: "high" } } }] },
      { steps: [{ text: "done again" }] },
    ]);
    let from = c.frames.length;
    let turn = c.turn(s.session_id, "ask codex");
    await approveNext(c, from);
    let r = await turn;
    assert.equal(r.terminal.type, "turn.completed");
    const tc = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_x")!;
    assert.equal(tc.success, true, tc.output as string);
    const out = JSON.parse(tc.output as string) as Msg;
    assert.equal(out.agent, "codex");
    assert.equal(out.status, "completed");
    assert.equal(out.exit_code, 0);
    assert.equal(out.session, "codex-1");
    assert.equal(out.turn, 1);
    assert.deepEqual(out.usage, { input_tokens: 1200, cached_input_tokens: 200, output_tokens: 34 });
    const fields = Object.fromEntries((out.reply as string).split("|").map((p) => [p.split("=")[0], p.slice(p.indexOf("=") + 1)]));
    assert.equal((out.reply as string).split("|")[0], "argv ok");
    assert.equal(fields.prompt, "fix the test");
    assert.equal(fields.cwd, cwd);
    assert.equal(fields.key, "none", "API keys are not inherited");
    assert.equal(fields.home, join(rig.home, "adapters", "codex"));
    assert.match(fields.parent, new RegExp(`^[0-9a-f]{8}/${s.session_id}/codex-[0-9a-f]{6}$`));
    assert.equal(fields.depth, "1");
    assert.equal(fields.resumed, "none");
    const progress = r.frames.filter((m) => m.type === "tool.progress" && m.call_id === "call_x").map((m) => m.text as string).join("\n");
    assert.ok(!progress.includes("sk-leaky"), "credential-like values are redacted from progress");
    assert.ok(!JSON.stringify(c.frames).includes("sk-parent-secret"));

    from = c.frames.length;
    turn = c.turn(s.session_id, "continue");
    await approveNext(c, from);
    r = await turn;
    const ty = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_y")!;
    const out2 = JSON.parse(ty.output as string) as Msg;
    assert.equal(out2.session, "codex-1");
    assert.equal(out2.turn, 2);
    assert.match(out2.reply as string, /resumed=0199a213-81c0-7800-8aa1-bbab2a035a53/);
  } finally {
    c.end();
    await exited;
    await rig.fake.close();
  }
});

const FAKE_CLAUDE = `#!${process.execPath}
const args = process.argv.slice(2);
const sid = args.includes("--resume") ? args[args.indexOf("--resume") + 1] : args[args.indexOf("--session-id") + 1];
let prompt = "";
process.stdin.on("data", (d) => (prompt += d));
process.stdin.on("end", () => {
  const e = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
  e({ type: "system", subtype: "init", session_id: sid, cwd: process.cwd(), tools: ["Bash", "Edit"], model: "claude-sonnet-4-5" });
  e({ type: "assistant", session_id: sid, message: { id: "msg_1", role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "npm test" } }] } });
  e({ type: "user", session_id: sid, message: { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "ok" }] } });
  const fixed = args.slice(0, 5).join(" ") === "-p --output-format stream-json --verbose --dangerously-skip-permissions";
  const reply = "claude " + (fixed ? "argv ok" : "argv bad") + " prompt=" + prompt + " home=" + process.env.CLAUDE_CONFIG_DIR + " key=" + (process.env.ANTHROPIC_API_KEY ?? "none") + " resumed=" + args.includes("--resume");
  e({ type: "assistant", session_id: sid, message: { id: "msg_2", role: "assistant", content: [{ type: "text", text: reply }] } });
  e({ type: "result", subtype: "success", is_error: false, duration_ms: 10, num_turns: 2, result: reply, session_id: sid, total_cost_usd: 0.01, usage: { input_tokens: 50, output_tokens: 7, cache_read_input_tokens: 0 } });
});
`;

const FAKE_PI = `#!${process.execPath}
const args = process.argv.slice(2);
const prompt = args[args.length - 1];
const e = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
e({ type: "session", id: "ccd569e0-4e1b-4c7d-a981-637ed4107310", version: 3, timestamp: "2026-01-13T00:33:34.702Z", cwd: process.cwd() });
e({ type: "agent_start" });
e({ type: "turn_start" });
e({ type: "tool_execution_start", toolCallId: "tool_1", toolName: "bash", args: { command: "ls" } });
e({ type: "tool_execution_end", toolCallId: "tool_1", toolName: "bash", result: { content: [{ type: "text", text: "ok" }] }, isError: false });
const fixed = args.slice(0, 3).join(" ") === "-p --mode json";
const text = "pi " + (fixed ? "argv ok" : "argv bad") + " prompt=" + prompt + " home=" + process.env.PI_CODING_AGENT_DIR + " resumed=" + args.includes("--session");
e({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text }], stopReason: "stop", usage: { input: 30, output: 5, cacheRead: 0, cacheWrite: 0 } } });
e({ type: "turn_end", message: { role: "assistant", content: [{ type: "text", text }] }, toolResults: [] });
`;

it("agent_claude and agent_pi run their CLIs with fixed argv, private homes and their event formats", async () => {
  const rig = await startRig();
  const bin = mkdtempSync(join(tmpdir(), "fake-agents-"));
  writeFileSync(join(bin, "claude"), FAKE_CLAUDE);
  writeFileSync(join(bin, "pi"), FAKE_PI);
  chmodSync(join(bin, "claude"), 0o755);
  chmodSync(join(bin, "pi"), 0o755);
  const { client: c, exited } = spawnStdio({ ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}`, ANTHROPIC_API_KEY: "sk-ant-parent-0123456789" });
  try {
    const s = await c.open();
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_c", name: "agent_claude", arguments: { prompt: "-dash prompt" } } }] },
      { steps: [{ toolCall: { id: "call_c2", name: "agent_claude", arguments: { prompt: "more", session: "claude-1" } } }] },
      { steps: [{ toolCall: { id: "call_p", name: "agent_pi", arguments: { prompt: "@file and more" } } }] },
      { steps: [{ toolCall: { id: "call_e", name: "agent_pi", arguments: { prompt: "x", effort: "high" } } }] },
      { steps: [{ text: "all done" }] },
    ]);
    const from = c.frames.length;
    const turn = c.turn(s.session_id, "use the CLIs");
    let seen = from;
    const approver = (async () => {
      for (let i = 0; i < 4; i++) {
        const a = await c.waitFor((m) => m.type === "approval.requested", seen);
        seen = c.frames.indexOf(a) + 1;
        c.request({ type: "approval.resolve", session_id: a.session_id, approval_id: a.approval_id, approved: true });
      }
    })();
    const r = await turn;
    await approver;
    assert.equal(r.terminal.type, "turn.completed");
    const result = (id: string): Msg => JSON.parse(r.frames.find((m) => m.type === "tool.completed" && m.call_id === id)!.output as string) as Msg;
    const c1 = result("call_c");
    assert.equal(c1.agent, "claude");
    assert.equal(c1.status, "completed");
    assert.equal(c1.session, "claude-1");
    assert.deepEqual(c1.usage, { input_tokens: 50, output_tokens: 7, cache_read_input_tokens: 0 });
    assert.equal(c1.reply, `claude argv ok prompt=-dash prompt home=${join(rig.home, "adapters", "claude")} key=none resumed=false`);
    const c2 = result("call_c2");
    assert.equal(c2.turn, 2);
    assert.match(c2.reply as string, /resumed=true$/);
    const p = result("call_p");
    assert.equal(p.agent, "pi");
    assert.equal(p.status, "completed");
    assert.equal(p.session, "pi-1");
    assert.deepEqual(p.usage, { input: 30, output: 5, cacheRead: 0, cacheWrite: 0 });
    assert.equal(p.reply, `pi argv ok prompt= @file and more home=${join(rig.home, "adapters", "pi")} resumed=false`);
    const e = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_e")!;
    assert.equal(e.error, "invalid_arguments");
  } finally {
    c.end();
    await exited;
    await rig.fake.close();
  }
});

it("a background agent_codex job is reported in a server-started turn", async () => {
  const rig = await startRig();
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-bg-"));
  writeFileSync(join(bin, "codex"), FAKE_CODEX);
  chmodSync(join(bin, "codex"), 0o755);
  const { client: c, exited } = spawnStdio({ ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}` });
  try {
    const s = await c.open();
    rig.fake.script([
      { steps: [{ toolCall: { id: "call_bg", name: "agent_codex", arguments: { prompt: "Land the fix\nin detail", background: true } } }] },
      { steps: [{ text: "started" }] },
      { steps: [{ text: "job-1 finished" }] },
    ]);
    const from = c.frames.length;
    const turn = c.turn(s.session_id, "start it in the background");
    await approveNext(c, from);
    const r = await turn;
    const tc = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_bg")!;
    assert.deepEqual(tc.jobs, [{ job: "job-1", tool: "agent_codex", status: "running", task: "Land the fix" }]);
    const end = await c.waitFor((m) => m.request_id === "background:1" && m.type === "turn.completed", 0, "the report turn");
    assert.deepEqual(end.origin, { kind: "background", jobs: ["job-1"] });
    const reportReq = rig.fake.requests.filter((q) => q.method === "POST").at(-1)!;
    assert.match(reportReq.body, /Background job job-1 \(agent_codex: Land the fix\) ended: completed/);
  } finally {
    c.end();
    await exited;
    await rig.fake.close();
  }
});

it("delegate tools are withheld once agent.max_delegation_depth is reached (across processes)", async () => {
  const rig = await startRig();
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-depth-"));
  writeFileSync(join(bin, "codex"), FAKE_CODEX);
  chmodSync(join(bin, "codex"), 0o755);
  const toolsOf = async (env: Record<string, string>, extra: Msg = {}): Promise<string> => {
    const { client: c, exited } = spawnStdio({ ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}`, ...env });
    const s = await c.open(extra);
    await c.turn(s.session_id, "hello");
    c.end();
    await exited;
    return rig.fake.requests.filter((q) => q.method === "POST").at(-1)!.body;
  };
  try {
    const direct = await toolsOf({});
    assert.match(direct, /"agent_berth"/);
    assert.match(direct, /"agent_codex"/);
    assert.match(direct, /"agent_wait"/);
    // This process is itself a delegated run at depth 2 (its SCV_DELEGATION_DEPTH): nothing more to delegate.
    const deep = await toolsOf({ SCV_DELEGATION_DEPTH: "2" });
    assert.doesNotMatch(deep, /"agent_berth"|"agent_codex"/);
    // A client declaring depth 2 counts the same.
    assert.doesNotMatch(await toolsOf({}, { delegation_depth: 2 }), /"agent_berth"|"agent_codex"/);
    assert.match(await toolsOf({}, { delegation_depth: 1 }), /"agent_berth"/);
  } finally {
    await rig.fake.close();
  }
});
