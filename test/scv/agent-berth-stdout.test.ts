/**
 * `agent_berth` when the nested Berth's stdout outlives it: a process it started keeps the pipe open. The call and the
 * conversation end with the nested Berth's process (plus a short drain), not when every holder of the pipe lets go
 * (as `agent_codex` and friends, cli-agents-stdout.test.ts): a helper left in its group is stopped with it and the
 * call fails at once as "exited mid-turn" instead of at its time limit; an untagged escapee in its own session (out
 * of the run's reach) no longer keeps the call, and the session's close, waiting forever.
 *
 * The nested Berth is a stand-in speaking just enough SCV (`initialize`, `session.start`, `turn.start`), run the way
 * `agent_berth` runs Berth (`node <bin> stdio`): it starts the helper, starts the turn, then dies.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { BerthDelegates } from "../../src/cli/delegates/agent-berth.js";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import { pidAlive } from "../../src/store/process-alive.js";
import { pidExists } from "../helpers/run-child.js";

const FAKE = (mode: "group" | "escape", pidFile: string): string => `
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const send = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
let buf = "";
process.stdin.on("data", (d) => {
  buf += d;
  for (let k; (k = buf.indexOf("\\n")) !== -1; buf = buf.slice(k + 1)) {
    const m = JSON.parse(buf.slice(0, k));
    if (m.type === "initialize") send({ type: "initialized", request_id: m.request_id, protocol_version: 3, server: { name: "fake", version: "0" } });
    else if (m.type === "session.start") send({ type: "session.started", request_id: m.request_id, session_id: "n1", cwd: m.cwd });
    else if (m.type === "turn.start") {
      const helper = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
        stdio: ["ignore", "inherit", "ignore"],
        ${mode === "escape" ? "detached: true, env: {}," : ""}
      });
      fs.writeFileSync(${JSON.stringify(pidFile)}, String(helper.pid));
      send({ type: "turn.started", request_id: m.request_id, session_id: "n1", turn_id: "t1" });
      send({ type: "assistant.completed", request_id: m.request_id, session_id: "n1", turn_id: "t1", content: "partial" });
      process.exit(3);
    }
  }
});
`;

async function run(mode: "group" | "escape", timeoutSeconds: number): Promise<{ content: string; helper: number; delegates: BerthDelegates; tool: ReturnType<BerthDelegates["tools"]>[number]; cwd: string }> {
  const dir = mkdtempSync(join(tmpdir(), "fake-berth-"));
  const pidFile = join(dir, "helper.pid");
  writeFileSync(join(dir, "berth.cjs"), FAKE(mode, pidFile));
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "berth-ws-"));
  const delegates = new BerthDelegates({ jobs: new JobBook(() => undefined), home, berthBin: join(dir, "berth.cjs"), env: { PATH: process.env["PATH"] }, log: () => undefined });
  const tool = delegates.tools({ sessionId: "s1", depth: 0, cwd, unattended: () => "deny" }, 2).find((t) => t.spec.name === "agent_berth")!;
  const r = await tool.run({ prompt: "go", timeout_seconds: timeoutSeconds }, { cwd, signal: new AbortController().signal, onProgress: () => undefined });
  return { content: r.content, helper: Number(readFileSync(pidFile, "utf8")), delegates, tool, cwd };
}

it("a helper left in the nested Berth's group does not hold a call whose Berth died until its time limit", { skip: process.platform !== "linux", timeout: 30_000 }, async () => {
  // The time limit is the largest allowed: before the fix the call ended only when it ran out.
  const { content, helper, delegates, tool, cwd } = await run("group", 3600);
  assert.equal(content, "agent_berth: the nested Berth berth-1 exited mid-turn; the conversation has ended");
  assert.equal(pidAlive(helper), false, "the helper in the nested Berth's group is stopped with it");
  const again = await tool.run({ prompt: "more", session: "berth-1" }, { cwd, signal: new AbortController().signal, onProgress: () => undefined });
  assert.equal(again.content, "agent_berth: no conversation berth-1 in this session");
  await delegates.close();
});

it("an untagged escapee holding the nested Berth's stdout keeps neither the call nor the session's close waiting", { skip: process.platform !== "linux", timeout: 30_000 }, async () => {
  let helper = 0;
  try {
    const r = await run("escape", 1);
    helper = r.helper;
    assert.match(r.content, /exited mid-turn|"status":"timeout"/);
    await r.delegates.closeSession("s1");
    await r.delegates.close();
  } finally {
    if (helper > 0 && pidExists(helper)) process.kill(helper, "SIGKILL");
  }
});
