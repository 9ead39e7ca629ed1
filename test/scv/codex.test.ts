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
    assert.match(fields.parent!, new RegExp(`^[0-9a-f]{8}/${s.session_id}/codex-[0-9a-f]{6}$`));
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
