/**
 * What a delegated CLI writes, read within bounds, against a fake `codex` speaking the real `exec --json` stream:
 * - Event lines: a line of exactly 1 MiB is read; a longer one is skipped whole up to its newline, and the line after
 *   it is read as usual. Before, once the held part of a long line went past the bound it was dropped and the rest of
 *   that line was read as a line of its own, so a long line whose end looked like an event (here after enough
 *   padding that the drop falls inside it however the pipe chunks it) produced that event.
 * - The `-o` reply file: read to a tool result's bound (50 KiB) and one byte, never whole (a huge file cost its size
 *   in memory, and past ~512 MB the read failed and the reply fell back silently to the last streamed message); the
 *   result names the file's whole size (`reply_bytes`). The reply's bound itself (the whole result within a tool
 *   result's bound) is tested at the bound and one past in cli-agent-reply.test.ts. A FIFO left at the path is not
 *   read: before, opening it waited for a writer for ever, so the call (and its session's close) never ended after
 *   the agent had.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { it } from "node:test";
import { fakeCodexTool } from "./fake-codex.js";

const MAX_LINE = 1 << 20;
const MAX_RESULT = 50 * 1024;

async function runCodex(body: string): Promise<{ content: string; out: Record<string, unknown>; progress: string[] }> {
  const { tool, cwd } = fakeCodexTool(`#!${process.execPath}
const fs = require("node:fs");
const args = process.argv.slice(2);
const out = args[args.indexOf("-o") + 1];
const e = (o) => JSON.stringify(o) + "\\n";
const cmd = (c) => e({ type: "item.started", item: { id: "i", type: "command_execution", command: c, status: "in_progress" } });
process.stdin.resume();
process.stdin.on("end", () => {
${body}
});
`);
  const progress: string[] = [];
  const r = await tool.run({ prompt: "go" }, { cwd, signal: new AbortController().signal, onProgress: (l) => progress.push(l) });
  return { content: r.content, out: JSON.parse(r.content) as Record<string, unknown>, progress };
}

it("an event line at the bound is read; longer ones are skipped whole, and the next line is read", { timeout: 20_000 }, async () => {
  const { out, progress } = await runCodex(`
  const pad = (line, n) => " ".repeat(n - Buffer.byteLength(line) + 1) + line; // n bytes with its newline left out
  const lines = [
    pad(cmd("at-limit"), ${MAX_LINE}),
    pad(cmd("one-past"), ${MAX_LINE + 1}),
    // Longer than the bound by more than a pipe read: wherever the reader's chunks fall, the old drop was in the padding.
    " ".repeat(${MAX_LINE + 256 * 1024}) + cmd("tail-of-long-line"),
    cmd("next"),
    e({ type: "item.completed", item: { id: "m", type: "agent_message", text: "done" } }),
  ];
  process.stdout.write(lines.join(""), () => process.exit(0));
  `);
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.reply, "done");
  assert.deepEqual(progress, ["$ at-limit", "$ next"]);
});

it("the -o reply file is read to its bound, never whole: a long one gives its start, naming its whole size", { timeout: 20_000 }, async () => {
  const streamed = `process.stdout.write(e({ type: "item.completed", item: { type: "agent_message", text: "streamed" } }));`;
  const size = 8 * 1024 * 1024;
  const { content, out } = await runCodex(`fs.writeFileSync(out, "€".repeat(${size / 4}) + "x".repeat(${size / 4})); ${streamed}`);
  assert.ok(Buffer.byteLength(content) <= MAX_RESULT, `${Buffer.byteLength(content)} bytes`);
  assert.equal(out.truncated, true);
  assert.equal(out.reply_bytes, size, "the file's whole size");
  assert.match(out.reply as string, /^(€)+$/);
  assert.equal(out.reply_omitted_bytes, size - Buffer.byteLength(out.reply as string));
});

it("a FIFO at the -o path is not read: the call ends with the streamed reply", { skip: process.platform !== "linux" || !existsSync("/usr/bin/mkfifo"), timeout: 20_000 }, async () => {
  const { out } = await runCodex(`
  require("node:child_process").execFileSync("/usr/bin/mkfifo", [out]);
  process.stdout.write(e({ type: "item.completed", item: { type: "agent_message", text: "streamed" } }), () => process.exit(0));
  `);
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.reply, "streamed");
  assert.equal(out.truncated, false);
});
