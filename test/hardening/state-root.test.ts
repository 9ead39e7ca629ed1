/**
 * Issue 18: the app-service accepted an MC_HOME owned and writable by another user (0777) and ran that user's
 * settings.json MCP servers. Every door refuses a state root not owned by the user or writable by group/others,
 * with a message saying how to fix it.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, writeFileSync, existsSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { checkStateRoot, prepareStateRoot } from "../../src/store/state-root.js";
import { BERTH_BIN } from "../helpers/paths.js";

function hostileRoot(mode: number): { dir: string; marker: string } {
  const dir = mkdtempSync(join(tmpdir(), "berth-hostile-"));
  const marker = join(dir, "mcp-ran");
  // A settings file whose MCP server would prove it ran.
  writeFileSync(join(dir, "settings.json"), JSON.stringify({ mcp_servers: { evil: { command: "sh", args: ["-c", `touch ${marker}`] } } }));
  chmodSync(dir, mode);
  return { dir, marker };
}

function runDoor(args: string[], home: string, input = ""): { code: number | null; stderr: string; stdout: string } {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, MC_HOME: home };
  const r = spawnSync(process.execPath, [BERTH_BIN, ...args], { env, input, encoding: "utf8", timeout: 30_000 });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

/** Every door that opens the state root, and how a test starts it. */
const DOORS = [
  ["service", ["service"]],
  ["chat", ["chat", "-p", "hi"]],
  ["daemon", ["daemon"]],
  ["stdio", ["stdio"]],
  ["acp", ["acp"]],
] as const;

const INIT = JSON.stringify({ protocol_version: 1, kind: "request", request_id: "i", method: "initialize", payload: { supported_protocol_versions: [1] } }) + "\n";

test("app-service accepts a 0777 MC_HOME (issue 18): every door refuses it and says chmod 700", { timeout: 60_000 }, () => {
  const { dir, marker } = hostileRoot(0o777);
  for (const [door, args] of DOORS) {
    const r = runDoor([...args], dir, door === "service" ? INIT : "");
    assert.equal(r.code, 1, `${door}: ${r.stderr}`);
    assert.equal(r.stdout, "", `${door} answered nothing`);
    assert.equal(r.stderr, `berth ${door}: the state directory ${dir} is writable by others (mode 777); fix it with: chmod 700 ${dir}\n`);
  }
  assert.equal(existsSync(marker), false, "no MCP server of the hostile settings ran");
  assert.equal(statSync(dir).mode & 0o777, 0o777, "the directory was not silently chmodded");
  // After the fix the service starts.
  chmodSync(dir, 0o700);
  const ok = runDoor(["service"], dir, INIT);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /"request_id":"i"/);
});

test("a state root owned by another user (issue 18) is refused with the fix", { skip: process.getuid?.() !== 0 ? "needs root to chown a directory to another user" : false }, () => {
  const { dir } = hostileRoot(0o700);
  chownSync(dir, 4242, 4242);
  const r = runDoor(["service"], dir, INIT);
  assert.equal(r.code, 1);
  assert.equal(r.stderr, `berth service: the state directory ${dir} is owned by another user (uid 4242); use a directory you own (set MC_HOME), or as its owner run: chown 0 ${dir} && chmod 700 ${dir}\n`);
});

test("checkStateRoot: group-writable, not a directory, missing; prepareStateRoot creates 0700", () => {
  const base = mkdtempSync(join(tmpdir(), "berth-root-"));
  chmodSync(base, 0o770);
  assert.match(checkStateRoot(base) ?? "", /writable by its group \(mode 770\); fix it with: chmod 700 /);
  chmodSync(base, 0o755);
  assert.equal(checkStateRoot(base), null, "0755 is trusted (others may read, not write)");
  writeFileSync(join(base, "file"), "");
  assert.match(checkStateRoot(join(base, "file")) ?? "", /is not a directory; set MC_HOME to a directory you own/);
  assert.match(checkStateRoot(join(base, "missing")) ?? "", /cannot be used \(ENOENT\)/);
  const fresh = join(base, "a", "b");
  assert.equal(prepareStateRoot(fresh), null);
  assert.equal(statSync(fresh).mode & 0o777, 0o700);
});

test("a HOME naming nothing is reported by every door, not created; an explicit MC_HOME is created with its parents", { timeout: 60_000 }, () => {
  const base = mkdtempSync(join(tmpdir(), "berth-nohome-"));
  const home = join(base, "gone", "user");
  for (const [door, args] of DOORS) {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home };
    const r = spawnSync(process.execPath, [BERTH_BIN, ...args], { env, input: door === "service" ? INIT : "", encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 1, `${door}: ${r.stderr}`);
    assert.equal(r.stdout, "", `${door} answered nothing`);
    assert.equal(
      r.stderr,
      `berth ${door}: the home directory ${home} (HOME) does not exist, so the state directory ${join(home, ".berth")} was not created; set HOME to your home directory, or MC_HOME to a directory you own\n`,
    );
    assert.equal(existsSync(join(base, "gone")), false, `${door} created nothing`);
  }
  // A home directory that exists: the default root is created in it (0700).
  const present = join(base, "present");
  mkdirSync(present);
  assert.equal(prepareStateRoot(join(present, ".berth"), present), null);
  assert.equal(statSync(join(present, ".berth")).mode & 0o777, 0o700);
  // An explicit MC_HOME that does not exist yet: created with its parents, as before.
  const explicit = join(base, "p", "q", "state");
  const ok = spawnSync(process.execPath, [BERTH_BIN, "service"], { env: { PATH: process.env.PATH, HOME: home, MC_HOME: explicit }, input: INIT, encoding: "utf8", timeout: 30_000 });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /"request_id":"i"/);
  assert.equal(statSync(explicit).mode & 0o777, 0o700);
});
