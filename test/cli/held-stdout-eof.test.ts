/**
 * A client that closes stdin while it holds stdout open without reading it: `berth service` and `berth stdio` end as
 * at any EOF and exit 0 once their pending output made no progress for the grace period (process-io.ts
 * `STDOUT_GRACE_MS`), instead of staying alive for ever (holding their session leases) on a write nobody will read.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";
import { startRig, startTurn } from "../turns/helpers.js";

it("berth service: stdin closed during a turn while stdout is held unread: the turn is recorded cancelled and it exits 0", { timeout: 60_000 }, async () => {
  const rig = await startRig();
  const svc = rig.svc;
  try {
    const sid = (await svc.request("session.create", {})).payload.session_id as string;
    // Thousands of deltas (~300 bytes of output each): far more than the pipe holds once the client stops reading,
    // so the turn's worker waits on backpressure and its last writes cannot finish.
    rig.fake.script([{ steps: [...Array.from({ length: 3000 }, () => ({ text: "y" })), { waitForAbort: true }] }]);
    const held = new Promise<void>((resolve) => {
      let seen = "";
      svc.child.stdout.removeAllListeners("data");
      svc.child.stdout.on("data", (d: string) => {
        seen += d;
        if (!seen.includes('"turn.assistant_delta"')) return;
        svc.child.stdout.pause();
        svc.child.stdout.removeAllListeners("data");
        resolve();
      });
    });
    void startTurn(svc, "talk", "t1", sid).catch(() => undefined);
    await held;
    svc.child.stdin.end();
    assert.deepEqual(await svc.exited, { code: 0, signal: null }, svc.stderr);
    const records = readFileSync(join(svc.home, "sessions", `${sid}.jsonl`), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; status?: string });
    assert.deepEqual(records.at(-1), { ...records.at(-1), kind: "terminal", status: "cancelled" });
  } finally {
    if (svc.child.exitCode === null && svc.child.signalCode === null) svc.child.kill("SIGKILL");
    await rig.fake.close();
  }
});

it("berth stdio: a client that never reads stdout and closes stdin (a send stays blocked): it exits 0", { timeout: 60_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-stdio-eof-"));
  const env = { PATH: process.env["PATH"] ?? "", HOME: home, MC_HOME: home, BERTH_SCV_SEND_TIMEOUT_MS: "50", BERTH_SCV_CLEANUP_GRACE_MS: "50" };
  const child = spawn(process.execPath, [BERTH_BIN, "stdio"], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  child.stdout.pause(); // never read
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  child.stdin.on("error", () => undefined);
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on("close", (code, signal) => resolve([code, signal])));
  try {
    // Answers far larger than the pipe: each `initialize` is answered.
    const frames = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ type: "initialize", request_id: `r${i}`, protocol_version: 3 }) + "\n");
    child.stdin.end(frames.join(""));
    assert.deepEqual(await exited, [0, null], stderr);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
});
