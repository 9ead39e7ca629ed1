/**
 * The delegated prompt's bound is 262,144 UTF-8 bytes (the SCV prompt bound the nested Berth enforces), not
 * characters: at the bound a multi-byte prompt reaches the agent whole; one byte past it is refused before anything
 * starts, naming the bound and the fix. Before, the schema counted characters, so a multi-byte prompt within them
 * went to the nested Berth, which refused the turn ("the nested Berth refused the turn (invalid_request)").
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { BerthDelegates } from "../../src/cli/delegates/agent-berth.js";
import { JobBook } from "../../src/cli/delegates/jobs.js";
import { fakeCodexTool } from "./fake-codex.js";

/** A `codex` replying with the byte length of the prompt it read on stdin. */
const FAKE_CODEX = `#!${process.execPath}
const chunks = [];
process.stdin.on("data", (d) => chunks.push(d));
process.stdin.on("end", () => {
  const n = Buffer.concat(chunks).length;
  process.stdout.write(JSON.stringify({ type: "item.completed", item: { id: "i", type: "agent_message", text: "bytes=" + n } }) + "\\n");
  process.stdout.write(JSON.stringify({ type: "turn.completed", usage: {} }) + "\\n");
});
`;

const AT = "é".repeat(131_072); // 262,144 bytes, 131,072 characters
const PAST = AT + "a";
const ctx = (cwd: string): { cwd: string; signal: AbortSignal; onProgress: () => void } => ({ cwd, signal: new AbortController().signal, onProgress: () => undefined });

it("agent_codex: a prompt of 262144 bytes reaches the agent whole; one byte more is refused with the bound and the fix", async () => {
  const { tool, cwd } = fakeCodexTool(FAKE_CODEX);
  const ok = await tool.run({ prompt: AT }, ctx(cwd));
  assert.equal(ok.isError, false, ok.content);
  assert.equal((JSON.parse(ok.content) as { reply: string }).reply, "bytes=262144");
  const past = await tool.run({ prompt: PAST }, ctx(cwd));
  assert.equal(past.isError, true);
  assert.equal(past.errorKind, "invalid_arguments");
  assert.equal(past.content, "agent_codex: `prompt` is 262145 bytes, over the 262144-byte (256 KiB) limit of a delegated prompt; shorten it, or write the details to a file in the workspace and name that file in the prompt");
});

it("agent_berth: a prompt one byte past 262144 is refused before a nested Berth is started", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "berth-ws-"));
  const d = new BerthDelegates({ jobs: new JobBook(() => undefined), home, berthBin: join(home, "no-such-berth"), env: {}, log: () => undefined });
  const tool = d.tools({ sessionId: "s1", depth: 0, cwd, unattended: () => "deny" }, 2).find((t) => t.spec.name === "agent_berth")!;
  for (const background of [false, true]) {
    const past = await tool.run({ prompt: PAST, background }, ctx(cwd));
    assert.equal(past.errorKind, "invalid_arguments");
    assert.match(past.content, /^agent_berth: `prompt` is 262145 bytes, over the 262144-byte \(256 KiB\) limit/);
  }
  assert.equal(existsSync(join(home, "adapters")), false, "nothing was started for it");
  await d.close();
});
