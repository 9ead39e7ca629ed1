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

/**
 * A fake `codex` whose prompt is a spec (JSON): its reply is `"a" × a + rep × k + tail`, written to the `-o` file
 * (or, with `stream`, sent as the event stream's `agent_message` instead), with `err` bytes of quote- and
 * backslash-heavy stderr. When a `marks` directory is beside the script, it also leaves the `-o` file's path in
 * `marks/<pid>`, so a test can tell when Berth has read (and removed) it.
 */
export const SPEC_CODEX = `#!${process.execPath}
const fs = require("node:fs");
const path = require("node:path");
const args = process.argv.slice(2);
const out = args[args.indexOf("-o") + 1];
let prompt = "";
process.stdin.on("data", (d) => (prompt += d));
process.stdin.on("end", () => {
  const spec = JSON.parse(prompt);
  const reply = "a".repeat(spec.a ?? 0) + (spec.rep ?? "").repeat(spec.k ?? 0) + (spec.tail ?? "");
  const e = (o) => JSON.stringify(o) + "\\n";
  let s = e({ type: "thread.started", thread_id: "0199a213-81c0-7800-8aa1-bbab2a035a53" });
  if (spec.stream) s += e({ type: "item.completed", item: { id: "m", type: "agent_message", text: reply } });
  else fs.writeFileSync(out, reply);
  const marks = path.join(__dirname, "marks");
  if (fs.existsSync(marks)) fs.writeFileSync(path.join(marks, String(process.pid)), out);
  s += e({ type: "turn.completed", usage: { input_tokens: 1, output_tokens: 2 } });
  if (spec.err) process.stderr.write('"\\\\'.repeat(spec.err / 2) + "END");
  process.stdout.write(s, () => process.exit(0));
});
`;
