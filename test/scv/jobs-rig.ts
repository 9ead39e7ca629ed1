/**
 * The rig of the report-turn tests (jobs-report, jobs-report-retry): `berth stdio` on the fake provider (which answers
 * a report turn "reported", anything else "ok") with a fake `codex` first on PATH (fake-codex.ts `SPEC_CODEX`): a prompt `{"a": n}` makes it
 * write a reply of n bytes to its `-o` file and leave that file's path in `marks/<pid>` (`jobsEnded` watches them).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lastUserText } from "../fakes/fake-provider.js";
import { SPEC_CODEX } from "./fake-codex.js";
import { spawnStdio, startRig, type Rig, type ScvClient } from "./client.js";

/** A report turn's prompt starts so (jobs.ts). */
export const REPORT = /^Background job/;

export interface Setup {
  rig: Rig;
  c: ScvClient;
  session: string;
  exited: Promise<number | null>;
  marks: string;
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
  const { client: c, exited } = spawnStdio({ ...rig.env, PATH: `${bin}:${process.env.PATH ?? ""}` });
  const s = await c.open();
  return { rig, c, session: s.session_id as string, exited, marks };
}

/** Resolves once `n` fake agents have run and Berth has read (and removed) each one's -o file. */
export async function jobsEnded(marks: string, n: number): Promise<void> {
  for (;;) {
    const files = readdirSync(marks);
    if (files.length >= n && files.every((f) => !existsSync(readFileSync(join(marks, f), "utf8")))) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}
