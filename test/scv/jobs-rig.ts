/**
 * The rig of the report-turn tests (jobs-report, jobs-report-retry, jobs-report-seen): `berth stdio` on the fake provider (which answers
 * a report turn "reported", anything else "ok") with a fake `codex` first on PATH (fake-codex.ts `SPEC_CODEX`): a prompt `{"a": n}` makes it
 * write a reply of n bytes to its `-o` file and leave that file's path in `marks/<pid>` (`jobsEnded` watches them).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { lastUserText, type FakeTurn } from "../fakes/fake-provider.js";
import { SPEC_CODEX } from "./fake-codex.js";
import { spawnStdio, startRig, type Msg, type Rig, type ScvClient } from "./client.js";

/** A report turn's prompt starts so (jobs.ts). */
export const REPORT = /^Background job/;

export interface Setup {
  rig: Rig;
  c: ScvClient;
  session: string;
  exited: Promise<number | null>;
  marks: string;
  /** The environment and session directory `berth stdio` runs with (to resume the session in another one). */
  env: Record<string, string>;
  cwd: string;
  child: ChildProcessWithoutNullStreams;
}

export async function setup(): Promise<Setup> {
  const rig = await startRig({
    settings: { approval_policy: "never" },
    fake: { defaultTurn: (_api, json) => ({ steps: [{ text: REPORT.test(lastUserText(json)) ? "reported" : "ok" }] }) },
  });
  const bin = mkdtempSync(join(tmpdir(), "fake-codex-jobs-"));
  writeFileSync(join(bin, "codex"), SPEC_CODEX);
  chmodSync(join(bin, "codex"), 0o755);
  const marks = join(bin, "marks");
  mkdirSync(marks);
  const env = { ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
  const cwd = mkdtempSync(join(tmpdir(), "jobs-ws-"));
  const { client: c, exited, child } = spawnStdio(env);
  const s = await c.open({}, cwd);
  return { rig, c, session: s.session_id as string, exited, marks, env, cwd, child };
}

/** Resolves once `n` fake agents have run and Berth has read (and removed) each one's -o file. */
export async function jobsEnded(marks: string, n: number): Promise<void> {
  for (;;) {
    const files = readdirSync(marks);
    if (files.length >= n && files.every((f) => !existsSync(readFileSync(join(marks, f), "utf8")))) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const TERMINAL = ["turn.completed", "turn.failed", "turn.cancelled"];

/**
 * A client turn starting a background job per reply size, held open until they all ended (so they end unseen) and
 * `until` settled, then `report`: the provider's answers to the first report turn (one per step).
 */
export async function startJobs(x: Setup, sizes: number[], report: FakeTurn | FakeTurn[], until: Promise<void> = Promise.resolve()): Promise<void> {
  const done = Promise.all([jobsEnded(x.marks, sizes.length), until]);
  x.rig.fake.script([
    { steps: sizes.map((a, i) => ({ toolCall: { id: `call_${i}`, name: "agent_codex", arguments: { prompt: JSON.stringify({ a }), background: true } } })) },
    { steps: [{ hold: done }, { text: "started" }] },
    ...(Array.isArray(report) ? report : [report]),
  ]);
  const t = await x.c.turn(x.session, "start the jobs");
  assert.equal(t.terminal.type, "turn.completed", JSON.stringify(t.terminal));
}

/** The `n`th report turn (`background:<n>` in this process): its `turn.started`, and its terminal once it ended. */
export async function reportTurn(x: Setup, n: number): Promise<{ started: Msg; terminal: Promise<Msg> }> {
  const rid = `background:${n}`;
  const started = await x.c.waitFor((m) => m.type === "turn.started" && m.request_id === rid, 0, `report turn ${n}`);
  return { started, terminal: x.c.waitFor((m) => m.request_id === rid && TERMINAL.includes(m.type as string), 0, `the end of report turn ${n}`) };
}

/** The request IDs of the turns started so far, in order. */
export const turnsStarted = (x: Setup): string[] => x.c.frames.filter((m) => m.type === "turn.started").map((m) => m.request_id as string);
export const reportPrompts = (x: Setup): string[] => x.rig.fake.requests.filter((q) => q.method === "POST" && REPORT.test(lastUserText(q.json))).map((q) => lastUserText(q.json));

export async function close(x: Setup): Promise<void> {
  x.c.end();
  assert.equal(await x.exited, 0);
  await x.rig.fake.close();
}
