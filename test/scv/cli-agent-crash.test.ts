/**
 * A delegated CLI that crashes after flooding its output: the call fails (`failed`, its exit code), its stdout flood
 * (a 3 MiB line without an end, then junk) is read within bounds, and `stderr_tail` is at most 2 KiB and never shows
 * part of a credential, even one the tail's cut goes through. Before, the tail was cut first and redacted after, so a
 * key cut at the tail's start lost the prefix the redaction looks for and its remaining characters reached the model,
 * the client and the session file.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { claudeEvent } from "../../src/cli/delegates/cli-agents.js";
import { fakeCodexTool } from "./fake-codex.js";

const KEY = "sk-proj-" + "Zq9xL2mN8vB4cR7tY1uW3eP6".repeat(2);
// The key's first 20 characters fall just before the last 2048 bytes of stderr, the rest inside them.
const FAKE_CODEX = `#!${process.execPath}
process.stdin.resume();
process.stdout.write("x".repeat(3 << 20));
process.stdout.write("\\nnot json\\n");
process.stderr.write("y".repeat(10000) + "\\n" + ${JSON.stringify(KEY)} + " " + "z".repeat(2048 - ${KEY.length - 20} - 1), () => process.exit(3));
`;

it("a crashing agent: failed with its exit code, bounded output, a 2 KiB stderr tail with no piece of a credential", async () => {
  const { tool, cwd } = fakeCodexTool(FAKE_CODEX);
  const r = await tool.run({ prompt: "go" }, { cwd, signal: new AbortController().signal, onProgress: () => undefined });
  assert.equal(r.isError, true);
  assert.equal(r.errorKind, "failed");
  const body = JSON.parse(r.content) as { status: string; exit_code: number; stderr_tail: string; reply: string };
  assert.equal(body.status, "failed");
  assert.equal(body.exit_code, 3);
  assert.equal(body.reply, "");
  assert.ok(Buffer.byteLength(body.stderr_tail) <= 2048);
  assert.match(body.stderr_tail, /z{100}$/);
  for (let i = 0; i + 8 <= KEY.length; i++) assert.ok(!body.stderr_tail.includes(KEY.slice(i, i + 8)), `no piece of the key: ${body.stderr_tail.slice(0, 80)}`);
});

it("Claude's refused calls (denied) are cut at 200 bytes only after redaction: no piece of a credential the cut goes through", () => {
  const token = "Zq9xL2mN8vB4cR7tY1uW3eP6".repeat(3);
  const prefix = `curl -H 'Authorization: Bearer `;
  // `$ ` + prefix + padding puts the 200-byte cut 20 characters into the token.
  const command = `${"x".repeat(200 - 2 - prefix.length - 20)} ${prefix}${token}' https://example.invalid`.slice(1);
  const r = claudeEvent({ type: "result", subtype: "success", is_error: false, result: "ok", permission_denials: [{ tool_name: "Bash", tool_input: { command } }] });
  const line = r.denied![0]!;
  assert.ok(Buffer.byteLength(line) <= 200);
  for (let i = 0; i + 8 <= token.length; i++) assert.ok(!line.includes(token.slice(i, i + 8)), `no piece of the token: ${line}`);
});
