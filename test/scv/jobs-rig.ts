/**
 * The rig of the report-turn tests (jobs-report, jobs-report-retry): `berth stdio` on the fake provider (which answers
 * a report turn "reported", anything else "ok") with a fake `codex` first on PATH, whose prompt `{"a": n}` makes it
 * write a reply of n bytes to its `-o` file and leave that file's path in `marks/<pid>` (`jobsEnded` watches them).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lastUserText } from "../fakes/fake-provider.js";
import { spawnStdio, startRig, type Rig, type ScvClient } from "./client.js";

/** The prompt is `{"a": n}`: reply `"a" × n`, written to the -o file, whose path is left in `marks/<pid>`. */
const FAKE_CODEX = `#!${process.execPath}
const fs = require("node:fs");
const path = require("node:path");
const args = process.argv.slice(2);
const out = args[args.indexOf("-o") + 1];
let prompt = "";
process.stdin.on("data", (d) => (prompt += d));
process.stdin.on("end", () => {
  const spec = JSON.parse(prompt);
  fs.writeFileSync(out, "a".repeat(spec.a));
  fs.writeFileSync(path.join(__dirname, "marks", String(process.pid)), out);
  const e = (o) => JSON.stringify(o) + "\\n";
  const s = e({ type: "thread.started", thread_id: "0199a213-81c0-7800-8aa1-bbab2a035a53" }) + e({ type: "turn.completed", usage: { input_tokens: 1, output_tokens: 2 } });
  process.stdout.write(s, () => process.exit(0));
});
`;

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
  writeFileSync(join(bin, "codex"), FAKE_CODEX);
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
