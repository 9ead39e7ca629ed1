/**
 * `agent_codex` when the agent's stdout outlives it: a process the agent started keeps the pipe open. The call ends
 * when the agent process ends (plus a short drain), not when every holder of the pipe lets go: a helper left in the
 * agent's group after a completed run is stopped and the result is `completed`; an escapee in its own session without
 * the `SCV_PARENT` tag (out of the run's reach) no longer keeps a timed-out call, and the session, waiting forever.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { CliAgents } from "../../src/cli/delegates/cli-agents.js";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import { pidAlive } from "../../src/store/process-alive.js";
import { pidExists } from "../helpers/run-child.js";

/** A `codex` that starts a helper holding its stdout (`MODE` escape: own session, empty environment), then replies. */
const FAKE = (mode: "group" | "escape", pidFile: string): string => `#!${process.execPath}
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const helper = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], {
  stdio: ["ignore", "inherit", "ignore"],
  ${mode === "escape" ? "detached: true, env: {}," : ""}
});
fs.writeFileSync(${JSON.stringify(pidFile)}, String(helper.pid));
helper.unref();
const e = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
e({ type: "item.completed", item: { id: "i", type: "agent_message", text: "hello" } });
${mode === "escape" ? "setInterval(() => {}, 1000);" : "e({ type: \"turn.completed\", usage: {} });"}
`;

async function run(mode: "group" | "escape", timeoutSeconds: number): Promise<{ body: Record<string, unknown>; helper: number }> {
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-"));
  const pidFile = join(bin, "helper.pid");
  writeFileSync(join(bin, "codex"), FAKE(mode, pidFile));
  chmodSync(join(bin, "codex"), 0o755);
  const home = mkdtempSync(join(tmpdir(), "codex-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "codex-ws-"));
  const agents = new CliAgents({ jobs: new JobBook(() => undefined), home, env: { PATH: bin } });
  const tool = agents.tools({ sessionId: "s1", depth: 0, cwd, unattended: () => "deny" }, 2).find((t) => t.spec.name === "agent_codex")!;
  const r = await tool.run({ prompt: "go", timeout_seconds: timeoutSeconds }, { cwd, signal: new AbortController().signal, onProgress: () => undefined });
  return { body: JSON.parse(r.content) as Record<string, unknown>, helper: Number(readFileSync(pidFile, "utf8")) };
}

it("a helper left in the agent's group does not hold a completed call until its time limit", { skip: process.platform !== "linux", timeout: 30_000 }, async () => {
  // The time limit is the largest allowed: before the fix the call ended only when it ran out.
  const { body, helper } = await run("group", 3600);
  assert.equal(body.status, "completed");
  assert.equal(body.reply, "hello");
  assert.equal(pidAlive(helper), false, "the helper in the agent's group is stopped with the run");
});

it("an untagged escapee holding stdout does not keep a timed-out call running forever", { skip: process.platform !== "linux", timeout: 30_000 }, async () => {
  let helper = 0;
  try {
    const r = await run("escape", 1);
    helper = r.helper;
    assert.equal(r.body.status, "timeout");
    assert.equal(r.body.reply, "hello");
  } finally {
    if (helper > 0 && pidExists(helper)) process.kill(helper, "SIGKILL");
  }
});
