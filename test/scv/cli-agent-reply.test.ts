/**
 * A delegated CLI agent's long reply reaches the model as a valid result. The result is bounded as a whole to the
 * 50 KiB bound of any tool result: the reply is whole while the result fits, and past that it keeps its start, cut
 * on a character boundary, with `truncated`, `reply_bytes`, `reply_omitted_bytes` and a `note` naming the numbers
 * and the conversation to continue for the rest. Before, the reply was bounded to 64 KiB on its own, so the result
 * went past the tool result bound, which cut it through its middle: the model (and the client, and the session file)
 * got a broken JSON document, with the note of the cut in the part left out. The job tools' answer fits a job's
 * result again the same way (its reply cut further), so it too stays a JSON document with the note.
 *
 * Driven over `berth stdio` with a fake `codex` speaking the real `exec --json` stream and `-o` file (and a nested
 * Berth on the same fake provider for `agent_berth`); what is
 * asserted is the tool message of the fake provider's next request.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { SPEC_CODEX } from "./fake-codex.js";
import { spawnStdio, startRig, type Msg, type Rig, type ScvClient } from "./client.js";

const MAX_RESULT = 50 * 1024;
const MAX_VIEW = 40 * 1024;

interface Spec {
  a?: number;
  rep?: string;
  k?: number;
  tail?: string;
  stream?: boolean;
  err?: number;
  background?: boolean;
}

const replyOf = (s: Spec): string => "a".repeat(s.a ?? 0) + (s.rep ?? "").repeat(s.k ?? 0) + (s.tail ?? "");

async function rig(): Promise<{ rig: Rig; c: ScvClient; session: string; exited: Promise<number | null> }> {
  const r = await startRig({ settings: { approval_policy: "never" } });
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-reply-"));
  writeFileSync(join(bin, "codex"), SPEC_CODEX);
  chmodSync(join(bin, "codex"), 0o755);
  const { client: c, exited } = spawnStdio({ ...r.env, PATH: `${bin}:${process.env.PATH ?? ""}` });
  const s = await c.open();
  return { rig: r, c, session: s.session_id as string, exited };
}

let turnsMade = 0;

/** One turn whose model calls `calls` at once; returns each call's tool message content from its next request. */
async function turn(r: Rig, c: ScvClient, session: string, calls: Array<{ name: string; args: Msg }>): Promise<string[]> {
  return (await turnOf(r, c, session, [calls]))[0]!;
}

/** One turn whose model calls each of `rounds` in turn (a round's calls at once); the tool messages of each round. */
async function turnOf(r: Rig, c: ScvClient, session: string, rounds: Array<Array<{ name: string; args: Msg }>>): Promise<string[][]> {
  const ids = rounds.map((calls, k) => calls.map((_, i) => `call_${++turnsMade}_${k}_${i}`));
  r.fake.script([...rounds.map((calls, k) => ({ steps: calls.map((x, i) => ({ toolCall: { id: ids[k]![i]!, name: x.name, arguments: x.args } })) })), { steps: [{ text: "ok" }] }]);
  const t = await c.turn(session, "go");
  assert.equal(t.terminal.type, "turn.completed", JSON.stringify(t.terminal));
  const req = r.fake.requests.filter((q) => q.method === "POST").at(-1)!;
  const messages = (req.json as { messages: Array<{ role: string; tool_call_id?: string; content: unknown }> }).messages;
  return ids.map((round) =>
    round.map((id) => {
      const m = messages.find((x) => x.role === "tool" && x.tool_call_id === id);
      assert.ok(m !== undefined && typeof m.content === "string", `the tool message of ${id}`);
      // The client's tool.completed carries the same document.
      const done = t.frames.find((f) => f.type === "tool.completed" && f.call_id === id);
      assert.ok(done?.output === m.content && done.truncated === false, `the client's tool.completed of ${id}`);
      return m.content;
    }),
  );
}

const codex = (s: Spec): { name: string; args: Msg } => ({ name: "agent_codex", args: { prompt: JSON.stringify(s), ...(s.background === true ? { background: true } : {}) } });

type Result = { reply: string; truncated: boolean; reply_bytes?: number; reply_omitted_bytes?: number; note?: string; session?: string; stderr_tail: string; status: string };

function parsed(content: string, max: number): Result {
  assert.ok(Buffer.byteLength(content) <= max, `${Buffer.byteLength(content)} bytes`);
  let r: Result;
  try {
    r = JSON.parse(content) as Result;
  } catch {
    assert.fail(`not JSON: …${content.slice(-300)}`);
  }
  assert.equal(r.status, "completed");
  return r;
}

/** A cut result: the reply's start, the numbers, and the note. */
function assertCut(r: Result, whole: string, bound: RegExp): void {
  assert.equal(r.truncated, true);
  assert.ok(whole.startsWith(r.reply), "the reply keeps its start");
  assert.ok(!r.reply.includes("\uFFFD"), "no character split");
  assert.equal(r.reply_bytes, Buffer.byteLength(whole));
  assert.equal(r.reply_omitted_bytes, Buffer.byteLength(whole) - Buffer.byteLength(r.reply));
  assert.match(r.note!, new RegExp(`^the reply is ${r.reply_bytes} bytes; its last ${r.reply_omitted_bytes} bytes are left out to fit ${bound.source}\\. Berth keeps no more of it: continue the conversation \\(session "${r.session}"\\) and ask the agent for the rest$`));
}

it("a reply at the bound arrives whole, one byte past it cut as valid JSON with the note; never through a character", { timeout: 30_000 }, async () => {
  const { rig: r, c, session, exited } = await rig();
  try {
    // The result's size apart from its reply (single-digit conversation handles throughout).
    const [probe] = await turn(r, c, session, [codex({ a: 10 })]);
    const bound = MAX_RESULT - (Buffer.byteLength(probe!) - 10);
    const specs: Spec[] = [
      { a: bound - 1 },
      { a: bound },
      { a: bound + 1 },
      { a: bound - 3, tail: "€" }, // at the bound, ending in a 3-byte character
      { a: bound - 2, tail: "€" }, // one past, the character across the bound
      { rep: "€", k: Math.ceil(bound / 3) + 1 }, // cut among 3-byte characters
      { rep: "😀", k: Math.ceil(bound / 4) + 1, stream: true }, // 4-byte ones, streamed (no -o file)
      { a: 70_000 }, // an -o file longer than what is read of it: its whole size is named
    ];
    const out = await turn(r, c, session, specs.map(codex));
    const res = out.map((o) => parsed(o, MAX_RESULT));
    assert.equal(Buffer.byteLength(out[1]!), MAX_RESULT, "at the bound the result fills it exactly");
    for (const i of [0, 1, 3]) {
      assert.ok(res[i]!.reply === replyOf(specs[i]!), `spec ${i} whole`);
      assert.equal(res[i]!.truncated, false);
      assert.equal(res[i]!.note, undefined);
    }
    for (const i of [2, 4, 5, 6, 7]) {
      assertCut(res[i]!, replyOf(specs[i]!), /the 51200-byte bound of a tool result/);
      // The longest reply that fits: the cut leaves less than one character of room unused.
      assert.ok(Buffer.byteLength(out[i]!) > MAX_RESULT - 4, `spec ${i}: ${Buffer.byteLength(out[i]!)} bytes`);
    }
    assert.equal(res[7]!.reply_bytes, 70_000);
  } finally {
    c.end();
    await exited;
    await r.fake.close();
  }
});

it("stderr_tail full of characters JSON escapes, with a long reply: the result still fits and says what it cut", { timeout: 30_000 }, async () => {
  const { rig: r, c, session, exited } = await rig();
  try {
    const spec = { a: 60_000, err: 20_000 };
    const [content] = await turn(r, c, session, [codex(spec)]);
    const res = parsed(content!, MAX_RESULT);
    assert.ok(res.stderr_tail.endsWith('"\\END'), res.stderr_tail.slice(-20));
    assertCut(res, replyOf(spec), /the 51200-byte bound of a tool result/);
  } finally {
    c.end();
    await exited;
    await r.fake.close();
  }
});

it("several background jobs each near the bound: every job tool answer fits and each result shown is valid JSON with the note", { timeout: 30_000 }, async () => {
  const { rig: r, c, session, exited } = await rig();
  try {
    const specs: Spec[] = [0, 1, 2].map((i) => ({ a: MAX_RESULT - 100 * i, rep: "€", k: 100, background: true }));
    // The jobs are started and waited for within one turn: none ends while the session is idle (a report turn).
    const wait = { name: "agent_wait", args: {} };
    const answers = (await turnOf(r, c, session, [specs.map(codex), [wait], [wait], [wait]])).slice(1).map((a) => a[0]!);
    const shown = new Map<string, { task: string; res: Result }>();
    for (const content of answers) {
      assert.ok(Buffer.byteLength(content) <= MAX_VIEW, `${Buffer.byteLength(content)} bytes`);
      const view = JSON.parse(content) as { jobs: Array<{ job: string; task: string; result?: string; result_cut?: boolean }> };
      const results = view.jobs.filter((x) => x.result !== undefined);
      assert.equal(results.length, 1, "one result per answer: each is near the bound");
      for (const j of results) {
        assert.equal(j.result_cut, true);
        shown.set(j.job, { task: j.task, res: parsed(j.result!, MAX_VIEW) });
      }
    }
    assert.equal(shown.size, specs.length);
    // Which job is which: the task is the prompt's first line, the spec.
    for (const { task, res } of shown.values()) assertCut(res, replyOf(JSON.parse(task) as Spec), /the job tools' 40960-byte answer/);
  } finally {
    c.end();
    await exited;
    await r.fake.close();
  }
});

it("agent_berth: a nested Berth's long reply reaches the model cut to fit, as valid JSON with the note", { timeout: 30_000 }, async () => {
  const r = await startRig({ settings: { approval_policy: "never" } });
  const { client: c, exited } = spawnStdio(r.env);
  try {
    const s = await c.open();
    const long = "é".repeat(30_000); // 60,000 bytes of 2-byte characters
    r.fake.script([
      { steps: [{ toolCall: { id: "call_b", name: "agent_berth", arguments: { prompt: "write a lot" } } }] },
      { steps: [{ text: long }] }, // the nested Berth's turn
      { steps: [{ text: "ok" }] },
    ]);
    const t = await c.turn(s.session_id as string, "go");
    assert.equal(t.terminal.type, "turn.completed", JSON.stringify(t.terminal));
    const req = r.fake.requests.filter((q) => q.method === "POST").at(-1)!;
    const m = (req.json as { messages: Array<{ role: string; tool_call_id?: string; content: string }> }).messages.find((x) => x.tool_call_id === "call_b")!;
    const res = parsed(m.content, MAX_RESULT);
    assert.equal(res.session, "berth-1");
    assertCut(res, long, /the 51200-byte bound of a tool result/);
    assert.ok(Buffer.byteLength(m.content) > MAX_RESULT - 2, `${Buffer.byteLength(m.content)} bytes`);
  } finally {
    c.end();
    await exited;
    await r.fake.close();
  }
});
