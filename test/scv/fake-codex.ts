/**
 * A fake `codex` CLI for the delegated-agent tests: `script` (its whole source, a Node script) is installed as
 * `codex` in a fresh directory put first on the tool's PATH, and the session's `agent_codex` tool is returned with
 * the workspace it runs in. The tool runs the fake for real (a child process), as it would run Codex.
 */
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CliAgents } from "../../src/cli/delegates/cli-agents.js";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import type { Tool } from "../../src/runtime/types.js";

export function fakeCodexTool(script: string): { tool: Tool; cwd: string; bin: string } {
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-"));
  writeFileSync(join(bin, "codex"), script);
  chmodSync(join(bin, "codex"), 0o755);
  const home = mkdtempSync(join(tmpdir(), "codex-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "codex-ws-"));
  const agents = new CliAgents({ jobs: new JobBook(() => undefined), home, env: { PATH: bin } });
  const tool = agents.tools({ sessionId: "s1", depth: 0, cwd, unattended: () => "deny" }, 2).find((t) => t.spec.name === "agent_codex")!;
  return { tool, cwd, bin };
}
