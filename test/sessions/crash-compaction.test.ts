/**
 * Kill points during compaction (docs/sessions.md, "Crash and resume"). Mid-turn: a `berth service` whose turn reads
 * a file large enough for a small context window compacts between provider steps. At turn start (`start-`): a first
 * turn read it under a large window, and the next turn, under the small one, compacts before its request. The
 * service is killed with SIGKILL while the summary request streams (`summary`), once the checkpoint is on disk
 * (`checkpoint`), or there and then with the checkpoint's batch cut short at a seeded byte (`torn`: the file a short
 * write leaves; the cut right after the checkpoint line is also what a kill between the checkpoint and the batch of
 * its carried records left). A fresh service then lists, opens and replays the session and runs a turn.
 * Invariants: the replay is the compacted view (summary, then the whole turn) or the pre-compaction one (every turn
 * from its prompt), never the summary without the turn's prompt; the text accepted before the kill is kept; the
 * turn is settled; every line of the file is a record (but the cut fragment, an isolated line).
 * `CRASH_COMPACT_COUNT` (default 6: one of each point) and `CRASH_COMPACT_SEED` run more or other cases.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { prng } from "../helpers/prng.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { fakeSettings, startRig, startTurn, waitTerminal, type TurnRig } from "../turns/helpers.js";
import { assertSoundFile, fileRecords, listed, replayAll, serviceTurn, sessionFile, until, type Msg } from "./crash-rig.js";

const COUNT = Number(process.env.CRASH_COMPACT_COUNT ?? 6);
const SEED = Number(process.env.CRASH_COMPACT_SEED ?? 20261205);
const POINTS = ["summary", "checkpoint", "torn", "start-summary", "start-checkpoint", "start-torn"] as const;
type Point = (typeof POINTS)[number];
const PROMPT = "Please read big.txt and report.";
const BEFORE = "Reading the file. ";
const SUMMARY = "PROGRESS-SUMMARY: big.txt was read";
const NEXT = "And what does it say?";

/**
 * Writes big.txt and returns settings with a window the turn's second request crosses (the turns/compaction.test.ts
 * recipe: a measured first request).
 */
async function prepare(rig: TurnRig): Promise<string> {
  await startTurn(rig.svc, PROMPT, "measure");
  const ev = await waitTerminal(rig.svc, "measure");
  const e0 = ev.map((e) => e.payload.activity).find((a) => a?.kind === "context" && a.source === "fallback_estimate")!.current_tokens as number;
  const line = `FILE-LINE-CONTENT ${"x".repeat(60)}`;
  const lines = Math.ceil((e0 * 0.2 * 4) / (line.length + 1));
  writeFileSync(join(rig.svc.cwd!, "big.txt"), `${line}\n`.repeat(lines));
  const window = Math.round((e0 + (lines * (line.length + 1)) / 4 + 40) / 0.83);
  return JSON.stringify(fakeSettings(rig.fake.baseUrl, { contextWindow: window }));
}

/** Replay items as `summary:…`, `user:…`, `assistant:…` (parts joined), `terminal:<status>`. */
function view(items: Msg[]): string[] {
  const out: string[] = [];
  for (const it of items) {
    if (it.kind === "terminal") out.push(`terminal:${it.status}`);
    else if (it.kind === "summary" || it.kind === "message") {
      const head = it.kind === "summary" ? "summary" : it.role;
      if (it.part === 0) out.push(`${head}:${it.text}`);
      else out[out.length - 1] += it.text;
    }
  }
  return out;
}

/** The byte range of the last checkpoint line of `text` and the byte length of `text`. */
function checkpointLine(text: string): { from: number; to: number; end: number } {
  const at = text.lastIndexOf('"kind":"checkpoint"');
  const bytes = (chars: number): number => Buffer.byteLength(text.slice(0, chars));
  return { from: bytes(text.lastIndexOf("\n", at) + 1), to: bytes(text.indexOf("\n", at) + 1), end: bytes(text.length) };
}

/**
 * One case. Mid-turn points: the turn reads big.txt, which crosses the window. `start-` points: a first turn read it
 * under a large window, and the next turn compacts at its start (its user record written, the checkpoint after it).
 * `first`: the case's cut (a `torn` point) is right after the checkpoint line.
 */
async function oneCase(seed: number, point: Point, first: boolean): Promise<void> {
  const rnd = prng(seed);
  const label = `seed ${seed}: killed at ${point}`;
  const atStart = point.startsWith("start-");
  const rig = await startRig();
  let svc: ServiceProcess | null = null;
  try {
    const small = await prepare(rig);
    const settings = join(rig.svc.home, "settings.json");
    let sid: string;
    let prompt: string;
    const slow = point.endsWith("summary") ? 200 : 0; // the `summary` points land while the summary streams
    let summaryAt: number; // the summary request: the turn's first at its start, its second mid-turn (after the read)
    if (atStart) {
      rig.fake.script([{ steps: [{ text: BEFORE }, { toolCall: { id: "r1", name: "read", arguments: { path: "big.txt" } } }] }, { steps: [{ text: "It is long." }] }]);
      sid = (await startTurn(rig.svc, PROMPT, "c0")).payload.session_id as string;
      assert.equal((await waitTerminal(rig.svc, "c0")).find((e) => e.event === "turn.terminal")!.payload.status, "completed");
      writeFileSync(settings, small);
      summaryAt = rig.fake.requests.length + 1;
      rig.fake.script([{ steps: [{ text: SUMMARY, chunks: 8 }], chunkDelayMs: slow }, { steps: [{ text: "Done." }, { waitForAbort: true }] }]);
      await startTurn(rig.svc, NEXT, "c1", sid);
      prompt = NEXT;
    } else {
      writeFileSync(settings, small);
      summaryAt = rig.fake.requests.length + 2;
      rig.fake.script([
        { steps: [{ text: BEFORE }, { toolCall: { id: "r1", name: "read", arguments: { path: "big.txt" } } }] },
        { steps: [{ text: SUMMARY, chunks: 8 }], chunkDelayMs: slow },
        { steps: [{ text: "Done." }, { waitForAbort: true }] },
      ]);
      sid = (await startTurn(rig.svc, PROMPT, "c1")).payload.session_id as string;
      prompt = PROMPT;
    }
    let cut: number | null = null;
    if (point.endsWith("summary")) {
      const req = (await rig.fake.waitForRequests(summaryAt))[summaryAt - 1]!;
      assert.ok(req.body.includes("Summarize the conversation"), `${label}: the summary request streams`);
    }
    else {
      await until(`${label}: the checkpoint on disk`, () => fileRecords(rig.svc.home, sid).records.some((r) => r.kind === "checkpoint"));
      if (point.endsWith("torn")) {
        // Mid-turn, the checkpoint's batch runs from its line to the end of what is written (its carried records);
        // at turn start it is the checkpoint alone.
        const { from, to, end } = checkpointLine(fileRecords(rig.svc.home, sid).text);
        const last = atStart ? to : end;
        cut = first ? to : from + 1 + Math.floor(rnd() * (last - from - 1));
      }
    }
    rig.svc.kill("SIGKILL");
    await rig.svc.exited;
    rig.fake.unscript();
    // A cut inside a line leaves that fragment as an isolated malformed line (the next writer starts with LF).
    let torn: string[] = [];
    if (cut !== null) {
      const path = sessionFile(rig.svc.home, sid);
      truncateSync(path, cut);
      const text = readFileSync(path, "utf8");
      torn = text.endsWith("\n") ? [] : [text.slice(text.lastIndexOf("\n") + 1)];
    }
    const at = `${label}${cut !== null ? ` (cut at byte ${cut})` : ""}`;

    svc = new ServiceProcess({ home: rig.svc.home, cwd: rig.svc.cwd! });
    await svc.initialize();
    assert.ok(await listed(svc, sid), `${at}: listed`);
    assert.equal((await svc.request("session.open", {}, { session_id: sid })).error, null, `${at}: opens`);
    const v = view((await replayAll(svc, sid)).items);
    const turn = v.slice(v.lastIndexOf(`user:${prompt}`));
    if (v[0]?.startsWith("summary:") === true) {
      assert.equal(v[0], `summary:${SUMMARY}`, at);
      assert.equal(v[1], `user:${prompt}`, `${at}: the compacted view shows the turn's prompt: ${JSON.stringify(v)}`);
    } else {
      // The pre-compaction view: every turn from its prompt (at turn start, the first one completed).
      const whole = [`user:${PROMPT}`, `assistant:${BEFORE}It is long.`, "terminal:completed"];
      if (atStart) assert.deepEqual(v.slice(0, 3), whole, `${at}: the pre-compaction view shows the first turn: ${JSON.stringify(v)}`);
      assert.ok(v.includes(`user:${prompt}`), `${at}: the pre-compaction view shows the turn: ${JSON.stringify(v)}`);
    }
    assert.ok(turn.length >= 2, `${at}: the turn is in the replay: ${JSON.stringify(v)}`);
    if (!atStart) assert.ok(turn[1]!.startsWith(`assistant:${BEFORE}`), `${at}: the text accepted before the kill is kept: ${JSON.stringify(v)}`);
    assert.equal(turn.at(-1), "terminal:failed", `${at}: the turn is settled: ${JSON.stringify(v)}`);
    assert.equal((await serviceTurn(svc, sid, "after")).payload.status, "completed", `${at}: a new turn`);
    // (The new turn may compact at its start in this small window: the fake's echo then quotes the summary.)
    const after = view((await replayAll(svc, sid)).items).slice(-3);
    assert.ok(after[0] === "user:after" && after[1]!.startsWith("assistant:echo: ") && after[2] === "terminal:completed", `${at}: ${JSON.stringify(after)}`);
    assertSoundFile(rig.svc.home, sid, torn);
  } finally {
    if (svc !== null && svc.child.exitCode === null) {
      svc.end();
      await svc.exited;
    }
    await rig.close();
  }
}

test(`SIGKILL during mid-turn compaction (${COUNT} cases, seed ${SEED})`, { timeout: 60_000 + COUNT * 30_000 }, async () => {
  for (let i = 0; i < COUNT; i++) await oneCase(SEED + i, POINTS[i % POINTS.length]!, i < POINTS.length);
});
