/**
 * The daemon's SCV socket: path resolution (SCV_HOME, else MC_HOME), owner-only directory and socket, a stale socket
 * replaced, a live one never replaced (startup fails clearly), a second daemon on one MC_HOME refused with the running
 * one's pid and address, ready line field, SIGTERM exit with the socket removed.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";
import { childEnv, startDaemon, startRig } from "./client.js";

it("serves $SCV_HOME/state/server.sock owner-only, refuses a live socket, replaces a stale one, stops on SIGTERM", async () => {
  const rig = await startRig();
  const scvHome = mkdtempSync(join(tmpdir(), "scv-"));
  const d = await startDaemon({ ...rig.env, SCV_HOME: scvHome });
  try {
    const path = join(scvHome, "state", "server.sock");
    assert.equal(d.socket, path);
    assert.equal(statSync(join(scvHome, "state")).mode & 0o777, 0o700);
    assert.ok(statSync(path).isSocket());
    assert.equal(statSync(path).mode & 0o777, 0o600);
    // A second daemon (other MC_HOME) on the same SCV_HOME must not replace the live socket.
    const other = mkdtempSync(join(tmpdir(), "scv-home2-"));
    const second = spawn(process.execPath, [BERTH_BIN, "daemon"], {
      env: childEnv({ MC_HOME: other, SCV_HOME: scvHome }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    second.stdout.on("data", (b: Buffer) => (out += b.toString()));
    second.stderr.on("data", (b: Buffer) => (err += b.toString()));
    const code = await new Promise<number | null>((r) => second.once("close", r));
    assert.equal(code, 1);
    assert.equal(out, "");
    assert.match(err, /another server is listening on .*server\.sock/);
    // A second daemon on the same MC_HOME: refused, naming the running one and what to do.
    const twin = spawn(process.execPath, [BERTH_BIN, "daemon"], { env: childEnv({ ...rig.env, SCV_HOME: scvHome }), stdio: ["ignore", "pipe", "pipe"] });
    let twinErr = "";
    twin.stderr.on("data", (b: Buffer) => (twinErr += b.toString()));
    assert.equal(await new Promise<number | null>((r) => twin.once("close", r)), 1);
    assert.match(twinErr, new RegExp(`^berth daemon: another daemon \\(pid ${d.child.pid}\\) holds .*host; waiting up to 6\\.5 s for it to stop\\n`));
    assert.match(twinErr, new RegExp(`\\nberth daemon: another berth daemon \\(pid ${d.child.pid}, http://127\\.0\\.0\\.1:\\d+\\) is already running with .*; use it \\(\`berth open\` opens its web UI; \`berth chat\` connects to it\\), stop it \\(kill ${d.child.pid}\\), or set MC_HOME to another directory\\n$`));
    const c = await d.connect();
    await c.initialize();
    c.end();
    await c.closed;
  } finally {
    assert.equal(await d.stop(), 0);
  }
  assert.equal(existsSync(join(scvHome, "state", "server.sock")), false);

  // A stale socket file (its owner was SIGKILLed) is removed and replaced.
  const stale = join(scvHome, "state", "server.sock");
  const killer = spawn(process.execPath, ["-e", `require("net").createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, "SIGKILL"))`]);
  await new Promise((r) => killer.once("close", r));
  assert.ok(statSync(stale).isSocket());
  const d2 = await startDaemon({ ...rig.env, SCV_HOME: scvHome });
  const c2 = await d2.connect();
  await c2.initialize();
  c2.end();
  await c2.closed;
  assert.equal(await d2.stop(), 0);
  await rig.fake.close();
});

it("falls back to $MC_HOME/state/server.sock without SCV_HOME", async () => {
  const rig = await startRig();
  const d = await startDaemon({ ...rig.env, SCV_HOME: "" });
  try {
    assert.equal(d.socket, join(rig.home, "state", "server.sock"));
    assert.equal(d.ready.ready, true);
    assert.equal(typeof d.ready.backend_socket, "string");
  } finally {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  }
});

/** Runs `berth daemon` expecting it to refuse start-up: exit 1, nothing on stdout. Returns its stderr. */
async function refusedStart(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [BERTH_BIN, "daemon"], { env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr.on("data", (b: Buffer) => (err += b.toString()));
  assert.equal(await new Promise<number | null>((r) => child.once("close", r)), 1, err);
  assert.equal(out, "");
  return err;
}

it("refuses a socket path longer than 107 bytes with a message naming the fix", async () => {
  const rig = await startRig();
  const deep = join(mkdtempSync(join(tmpdir(), "scv-")), "d".repeat(120));
  const err = await refusedStart({ ...rig.env, SCV_HOME: deep });
  assert.match(err, /longer than 107 bytes; set SCV_HOME to a shorter directory/);
  await rig.fake.close();
});

it("the backend socket: at 107 bytes the daemon serves it; one byte past, start-up refuses naming MC_HOME, binding nothing", async () => {
  const rig = await startRig();
  const settings = readFileSync(join(rig.home, "settings.json"));
  const scvHome = mkdtempSync(join(tmpdir(), "scv-"));
  const homeFor = (socketBytes: number): string => {
    const base = mkdtempSync(join(tmpdir(), "h-"));
    const home = join(base, "x".repeat(socketBytes - "/host/backend.sock".length - base.length - 1));
    mkdirSync(home, { mode: 0o700 });
    writeFileSync(join(home, "settings.json"), settings);
    assert.equal(Buffer.byteLength(join(home, "host", "backend.sock")), socketBytes);
    return home;
  };
  try {
    const at = homeFor(107);
    const d = await startDaemon({ ...rig.env, MC_HOME: at, SCV_HOME: scvHome });
    assert.equal(d.ready.backend_socket, join(at, "host", "backend.sock"));
    assert.ok(statSync(join(at, "host", "backend.sock")).isSocket());
    assert.equal(await d.stop(), 0);

    const past = homeFor(108);
    const err = await refusedStart({ ...rig.env, MC_HOME: past, SCV_HOME: scvHome });
    assert.match(err, /backend\.sock is longer than 107 bytes; set MC_HOME to a shorter directory/);
    // libuv would have bound the path cut to 107 bytes: nothing may exist there.
    assert.equal(existsSync(join(past, "host", "backend.soc")), false);
  } finally {
    await rig.fake.close();
  }
});
