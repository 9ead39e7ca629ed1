/**
 * Issue 18, "Small durability gaps": a dead settings-lock holder is recovered at once with no temp file left;
 * creation debris (a 0-byte session file) never makes `session.list` incomplete forever; SIGTERM/SIGINT/SIGHUP shut
 * the app-service down like EOF; lock and owner files are owner-only.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { withFileLock, writeJsonAtomic } from "../../src/store/settings/locked-json.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { isAlive } from "../tools/helpers.js";
import { parsed, startRig, startTurn } from "../turns/helpers.js";

async function until<T>(what: string, f: () => T | undefined | false, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const LOCKED_JSON = pathToFileURL(join(import.meta.dirname, "../../src/store/settings/locked-json.js")).href;

test("a writer killed while holding settings.json.lock stalls the next config.set (issue 18): its lock is recovered at once", { timeout: 90_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-lock-"));
  const file = join(home, "settings.json");
  // A real writer process: takes the lock, leaves a write-file-atomic temp file as a mid-write kill would, then
  // waits to be killed.
  const script = `
    const { withFileLock } = await import(${JSON.stringify(LOCKED_JSON)});
    const fs = await import("node:fs");
    await withFileLock(${JSON.stringify(file)}, async () => {
      fs.writeFileSync(${JSON.stringify(file)} + ".123456789", "{");
      process.stdout.write("held\\n");
      await new Promise(() => setInterval(() => {}, 1000));
    });`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  assert.equal(statSync(`${file}.lock`).mode & 0o777, 0o700, "lock directory is owner-only");
  assert.equal(statSync(`${file}.lock.owner`).mode & 0o777, 0o600, "owner record is owner-only");
  child.kill("SIGKILL");
  await new Promise((r) => child.once("exit", r));
  // The holder died moments ago: keep its lock as fresh as a just-killed holder's would be for the whole attempt, so
  // only a dead-owner recovery can take it (before the fix the attempt waited for the 10 s stale rule, which never
  // arrives here, and failed with lock_failed).
  const fresh = setInterval(() => {
    try {
      utimesSync(`${file}.lock`, new Date(), new Date());
    } catch {
      /* recovered: gone */
    }
  }, 50);
  let written: boolean;
  try {
    written = await withFileLock(file, async () => {
      await writeJsonAtomic(file, { provider: "x" });
      return true;
    });
  } finally {
    clearInterval(fresh);
  }
  assert.equal(written, true);
  assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { provider: "x" });
  assert.deepEqual(readdirSync(home).sort(), ["settings.json"], "no lock, owner record or temp file is left");
});

test("a live holder of the settings lock is never taken over", { timeout: 30_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-lock-"));
  const file = join(home, "settings.json");
  let inside = 0;
  let maxInside = 0;
  await Promise.all(
    Array.from({ length: 6 }, () =>
      withFileLock(file, async () => {
        maxInside = Math.max(maxInside, ++inside);
        await new Promise((r) => setImmediate(r));
        inside--;
      }),
    ),
  );
  assert.equal(maxInside, 1);
});

test("kill -9 during session.create leaves a 0-byte session file (issue 18): list is complete and the debris is removed", { timeout: 90_000 }, async () => {
  const svc = new ServiceProcess();
  try {
    await svc.initialize();
    const created = await svc.request("session.create", {});
    assert.equal(created.error, null);
    // What a create killed between open and header write left behind (before creation became atomic).
    const debrisPath = join(svc.home, "sessions", "s00000000000-00000000000000000000.jsonl");
    writeFileSync(debrisPath, "");
    const list = await svc.request("session.list", {});
    assert.equal(list.error, null);
    assert.equal(list.payload.incomplete, false);
    assert.equal(list.payload.sessions.length, 1);
    assert.equal(existsSync(debrisPath), false, "the empty file was removed");
    const again = await svc.request("session.list", {});
    assert.equal(again.payload.incomplete, false);
  } finally {
    svc.end();
    await svc.exited;
  }
});

test("lock and owner files follow the umask (issue 18): lease owner files are 0600 and lock directories 0700", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-store-"));
  const store = new SessionStore({ home });
  const h = await store.create("/tmp");
  const owner = readdirSync(join(home, "session-locks")).find((n) => n.endsWith(".owner"))!;
  assert.equal(statSync(join(home, "session-locks", owner)).mode & 0o777, 0o600);
  const lease = readdirSync(join(home, "session-locks")).find((n) => n.endsWith(".lease"))!;
  assert.equal(statSync(join(home, "session-locks", lease)).mode & 0o777, 0o700);
  const text = readFileSync(store.paths.data(h.id), "utf8");
  assert.match(text, /^\{"kind":"header".*\n$/);
  await h.release();
});

for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  test(`${sig} kills the app-service at once (issue 18): it shuts down like EOF`, { timeout: 60_000 }, async () => {
    const rig = await startRig();
    try {
      rig.fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: "echo $$ > pid.txt; sleep 30 & echo $! > bg.txt; wait" } } }] }]);
      const res = await startTurn(rig.svc, "run it", "b1");
      assert.equal(res.error, null);
      const cwd = rig.svc.cwd!;
      const [pid, bg] = await until("pids written", () =>
        existsSync(join(cwd, "bg.txt")) && readFileSync(join(cwd, "bg.txt"), "utf8").trim() !== ""
          ? [Number(readFileSync(join(cwd, "pid.txt"), "utf8")), Number(readFileSync(join(cwd, "bg.txt"), "utf8"))]
          : undefined,
      );
      assert.ok(isAlive(pid) && isAlive(bg));
      rig.svc.kill(sig);
      const exit = await rig.svc.exited;
      assert.deepEqual(exit, { code: 0, signal: null }, rig.svc.stderr);
      const ev = parsed(rig.svc).filter((m) => m.kind === "event" && m.request_id === "b1");
      const terminal = ev.find((e) => e.event === "turn.terminal");
      assert.equal(terminal?.payload.status, "cancelled");
      await until("tool processes gone", () => !isAlive(pid) && !isAlive(bg));
      // The terminal record is durable: a new service replays the session with its cancelled turn.
      const sid = res.payload.session_id as string;
      const file = readFileSync(join(rig.svc.home, "sessions", `${sid}.jsonl`), "utf8");
      assert.match(file, /"kind":"terminal"[^\n]*"status":"cancelled"/);
    } finally {
      await rig.close();
    }
  });
}
