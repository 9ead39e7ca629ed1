/**
 * Settings/auth/catalog file locking on the repository's own mkdir lock protocol (store/sessions/dirlock.ts) and
 * atomic writes (store/atomic-file.ts), which replaced proper-lockfile and write-file-atomic (issue 19):
 * cross-process contention serializes every read-modify-write, a stale lock without an owner record is taken over,
 * a fresh one is waited for, and an atomic write leaves the exact mode, no temp file, and the old file on failure.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { readJsonFile, withFileLock, writeJsonAtomic, JsonFileError } from "../../src/store/settings/locked-json.js";
import { isTempName, writeFileAtomic } from "../../src/store/atomic-file.js";

const LOCKED_JSON = pathToFileURL(join(import.meta.dirname, "../../src/store/settings/locked-json.js")).href;

/** One process doing `n` locked read-increment-write cycles of `{count}` in `file`. */
function incrementer(file: string, n: number): Promise<number> {
  const script = `
    const { withFileLock, readJsonFile, writeJsonAtomic } = await import(${JSON.stringify(LOCKED_JSON)});
    for (let i = 0; i < ${n}; i++) {
      await withFileLock(${JSON.stringify(file)}, async () => {
        const cur = (await readJsonFile(${JSON.stringify(file)}))?.count ?? 0;
        await new Promise((r) => setImmediate(r));
        await writeJsonAtomic(${JSON.stringify(file)}, { count: cur + 1 });
      });
    }`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "inherit", "inherit"] });
  return new Promise((resolve) => child.once("exit", (code) => resolve(code ?? 1)));
}

test("locked read-modify-writes from several processes and in-process callers never lose an update", { timeout: 60_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-lockjson-"));
  const file = join(home, "settings.json");
  const local = Array.from({ length: 5 }, () =>
    withFileLock(file, async () => {
      const cur = ((await readJsonFile(file)) as { count?: number } | undefined)?.count ?? 0;
      await new Promise((r) => setImmediate(r));
      await writeJsonAtomic(file, { count: cur + 1 });
    }),
  );
  const codes = await Promise.all([incrementer(file, 5), incrementer(file, 5), incrementer(file, 5), ...local.map(async (p) => (await p, 0))]);
  assert.deepEqual(codes.slice(0, 3), [0, 0, 0]);
  assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { count: 20 });
  assert.deepEqual(readdirSync(home), ["settings.json"], "no lock directory, owner record or temp file is left");
});

test("a stale lock directory without an owner record is taken over; temp debris is removed under the lock", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-lockjson-"));
  const file = join(home, "auth.json");
  mkdirSync(`${file}.lock`);
  const old = new Date(Date.now() - 11_000);
  utimesSync(`${file}.lock`, old, old);
  writeFileSync(`${file}.9876543210`, "{"); // a killed writer's temp file
  writeFileSync(`${file}.bak`, "kept"); // not a temp name
  const got = await withFileLock(file, async () => {
    assert.ok(statSync(`${file}.lock`).mtimeMs > old.getTime(), "the lock directory is ours now");
    assert.equal(statSync(`${file}.lock`).mode & 0o777, 0o700);
    await writeJsonAtomic(file, { ok: true });
    return "done";
  });
  assert.equal(got, "done");
  assert.deepEqual(readdirSync(home).sort(), ["auth.json", "auth.json.bak"]);
});

test("a fresh lock directory without an owner record is waited for, then the lock is taken when it goes", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-lockjson-"));
  const file = join(home, "settings.json");
  mkdirSync(`${file}.lock`);
  let entered = false;
  const p = withFileLock(file, () => {
    entered = true;
    return Promise.resolve();
  });
  // The holder is alive (its lock is fresh): the caller must still be waiting after several retry rounds.
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(entered, false, "a fresh foreign lock is not taken over");
  (await import("node:fs")).rmdirSync(`${file}.lock`);
  await p;
  assert.equal(entered, true);
  assert.equal(existsSync(`${file}.lock`), false);
});

test("a lock that cannot be created (missing directory) fails as lock_failed", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "berth-lockjson-")), "missing", "settings.json");
  await assert.rejects(withFileLock(file, () => Promise.resolve()), (e: unknown) => e instanceof JsonFileError && e.reason === "lock_failed");
});

test("writeFileAtomic sets the exact mode, leaves no temp file, and keeps the old file when the write fails", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-atomic-"));
  const file = join(home, "registry.json");
  writeFileSync(file, "old\n", { mode: 0o644 });
  chmodSync(file, 0o644);
  const umask = process.umask(0o077);
  try {
    await writeFileAtomic(file, "new\n", 0o640);
  } finally {
    process.umask(umask);
  }
  assert.equal(readFileSync(file, "utf8"), "new\n");
  assert.equal(statSync(file).mode & 0o777, 0o640, "mode set whatever the umask");
  assert.deepEqual(readdirSync(home), ["registry.json"]);
  // A rename onto a directory fails after the temp file was written: the temp file goes, the target stays.
  const dirTarget = join(home, "sub");
  mkdirSync(dirTarget);
  writeFileSync(join(dirTarget, "x"), "");
  await assert.rejects(writeFileAtomic(dirTarget, "data"));
  assert.deepEqual(readdirSync(home).sort(), ["registry.json", "sub"]);
  assert.ok(isTempName("settings.json.123", "settings.json"));
  assert.ok(!isTempName("settings.json.lock", "settings.json"));
  assert.ok(!isTempName("settings.json.", "settings.json"));
});
