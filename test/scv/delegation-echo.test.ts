/**
 * What the model passed as a handle, echoed in "no job X" (`agent_wait`, `agent_status`, `agent_cancel`) and
 * "no conversation X" (`agent_codex`, `agent_berth`): control characters are dropped and credential-like values
 * redacted, as in the rest of the tool results. Before, up to 64 characters were echoed as given, so a terminal
 * escape or a key the model pasted reached the client, the session file and the model again.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { BerthDelegates } from "../../src/cli/delegates/agent-berth.js";
import { CliAgents } from "../../src/cli/delegates/cli-agents.js";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import type { Tool, ToolResult } from "../../src/runtime/types.js";

const KEY = "sk-proj-Zq9xL2mN8vB4cR7tY1uW";
const HOSTILE = `job-9\u001b[2J\u0007\u0000 ${KEY}`;
const ctx = { cwd: "/", signal: new AbortController().signal, onProgress: () => undefined };
const call = (tools: Tool[], name: string, args: Record<string, unknown>): Promise<ToolResult> => tools.find((t) => t.spec.name === name)!.run(args, ctx);

function clean(r: ToolResult, prefix: string): void {
  assert.equal(r.errorKind, "invalid_arguments", r.content);
  assert.ok(r.content.startsWith(prefix), r.content);
  assert.doesNotMatch(r.content, /[\u0000-\u001f\u007f-\u009f]/, JSON.stringify(r.content));
  assert.ok(!r.content.includes("sk-proj-Zq9x"), r.content);
  assert.match(r.content, /\[REDACTED\] in this session$/);
}

it("the job tools echo an unknown handle sanitised and redacted", async () => {
  const tools = new JobBook(() => undefined).tools("s1");
  clean(await call(tools, "agent_status", { job: HOSTILE }), "agent_status: no job job-9[2J ");
  clean(await call(tools, "agent_cancel", { job: HOSTILE }), "agent_cancel: no job job-9[2J ");
  // agent_wait takes up to 1024 characters: the key is redacted before the 64-byte cut, which would leave its start.
  const r = await call(tools, "agent_wait", { jobs: `job-9\u001b[2J,${"x".repeat(40)}${KEY}` });
  assert.equal(r.content, "agent_wait: no job job-9[2J in this session");
  const long = await call(tools, "agent_wait", { jobs: `${"x".repeat(50)}/${KEY}` });
  assert.ok(!long.content.includes("sk-proj"), long.content);
});

it("agent_codex and agent_berth echo an unknown conversation sanitised and redacted", async () => {
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-"));
  writeFileSync(join(bin, "codex"), `#!${process.execPath}\nprocess.exit(1);\n`);
  chmodSync(join(bin, "codex"), 0o755);
  const home = mkdtempSync(join(tmpdir(), "echo-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "echo-ws-"));
  const s = { sessionId: "s1", depth: 0, cwd, unattended: () => "deny" as const };
  const jobs = new JobBook(() => undefined);
  const codex = new CliAgents({ jobs, home, env: { PATH: bin } }).tools(s, 2);
  clean(await call(codex, "agent_codex", { prompt: "go", session: `codex-1\u001b[2J\u0007 ${KEY}` }), "agent_codex: no conversation codex-1[2J ");
  const berth = new BerthDelegates({ jobs, home, berthBin: join(bin, "no-berth"), env: {}, log: () => undefined }).tools(s, 2);
  clean(await call(berth, "agent_berth", { prompt: "go", session: `berth-1\u001b[2J\u0007 ${KEY}` }), "agent_berth: no conversation berth-1[2J ");
});
