/**
 * What a delegated CLI writes, read within bounds, against a fake `codex` speaking the real `exec --json` stream:
 * - Event lines: a line of exactly 1 MiB is read; a longer one is skipped whole up to its newline, and the line after
 *   it is read as usual. Before, once the held part of a long line went past the bound it was dropped and the rest of
 *   that line was read as a line of its own, so a long line whose end looked like an event (here after enough
 *   padding that the drop falls inside it however the pipe chunks it) produced that event.
 * - The `-o` reply file: read to 64 KiB and one byte, never whole (a huge file cost its size in memory, and past
 *   ~512 MB the read failed and the reply fell back silently to the last streamed message). At the bound the reply is
 *   the file and not `truncated`; one byte past, it is the first 64 KiB (cut on a character boundary) and
 *   `truncated`. A FIFO left at the path is not read: before, opening it waited for a writer for ever, so the call
 *   (and its session's close) never ended after the agent had.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { it } from "node:test";
import { fakeCodexTool } from "./fake-codex.js";

const MAX_LINE = 1 << 20;
const MAX_REPLY = 64 * 1024;

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
  let out: Record<string, unknown> = {};
  try {
    out = JSON.parse(r.content) as Record<string, unknown>;
  } catch {
    // Over the tool result bound: cut through its middle (the tests reading such a result read `content`).
  }
  return { content: r.content, out, progress };
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

it("the -o reply file is read to its bound: at it whole, one byte past cut and truncated", { timeout: 20_000 }, async () => {
  const streamed = `process.stdout.write(e({ type: "item.completed", item: { type: "agent_message", text: "streamed" } }));`;
  // The result (over the 50 KiB bound of any tool result) reaches the model as its head and tail: the reply's end
  // and the fields after it are in the tail.
  const at = await runCodex(`fs.writeFileSync(out, "a".repeat(${MAX_REPLY - 3}) + "END"); ${streamed}`);
  assert.match(at.content, /aEND","usage":\{\},"exit_code":0,"stderr_tail":"","truncated":false/);
  // One byte past, with a 3-byte character across the bound: cut before it.
  const past = await runCodex(`fs.writeFileSync(out, "a".repeat(${MAX_REPLY - 1}) + "€"); ${streamed}`);
  assert.match(past.content, /aaaa","usage":\{\},"exit_code":0,"stderr_tail":"","truncated":true/);
  assert.ok(!past.content.includes("€") && !past.content.includes("streamed"), past.content.slice(-200));
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
