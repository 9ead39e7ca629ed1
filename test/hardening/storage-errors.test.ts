/**
 * A session write the file system refuses names its cause and fix on every door, end to end. Real refusals, no
 * injection: `berth stdio` and `berth service` run under `ulimit -f` (Node ignores SIGXFSZ, so a write past the
 * limit fails `EFBIG` like a full disk fails `ENOSPC`). With a limit of 0 no session file can be created; with a
 * small one the session starts and a long answer's records cannot all be written.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { BERTH_BIN, MAGI_BIN } from "../helpers/paths.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { childEnv, ScvClient, startDaemon, startRig } from "../scv/client.js";

/** `node <bin> <args>` under a file-size limit of `blocks` (the shell's unit: 512 bytes for POSIX `sh`). */
function limited(blocks: number, bin: string, args: string[]): string[] {
  return ["-c", `ulimit -f ${blocks} && exec "$0" "$@"`, process.execPath, bin, ...args];
}

function stdioUnder(blocks: number, env: Record<string, string>): { c: ScvClient; exited: Promise<number | null> } {
  const child = spawn("/bin/sh", limited(blocks, BERTH_BIN, ["stdio"]), { env: childEnv(env), stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return { c: new ScvClient(child.stdout, child.stdin, () => stderr), exited };
}

const EFBIG_FIX = /\(EFBIG\); raise it \(ulimit -f\) and retry$/;

it("SCV: a session file that cannot be created refuses session.start with the cause and leaves no debris", async () => {
  const rig = await startRig();
  const { c, exited } = stdioUnder(0, rig.env);
  try {
    await c.initialize();
    const id = c.request({ type: "session.start", cwd: rig.home });
    const r = await c.reply(id, ["session.started"]);
    assert.equal(r.type, "error");
    assert.equal(r.code, "internal_error");
    assert.match(r.message as string, /^the session could not be created: /);
    assert.match(r.message as string, EFBIG_FIX);
    // The connection goes on: the same request is answered the same way.
    const again = c.request({ type: "session.start", cwd: rig.home });
    assert.equal((await c.reply(again, ["session.started"])).code, "internal_error");
    assert.deepEqual(readdirSync(join(rig.home, "sessions")), [], "no session file is left behind");
    assert.deepEqual(
      readdirSync(join(rig.home, "session-locks")).filter((n) => n.endsWith(".owner") || !n.includes(".")),
      [],
      "no lease or owner file is left behind",
    );
  } finally {
    c.end();
    const code = await exited;
    await rig.fake.close(); // before asserting: a failed assertion must not leave the fake provider holding the test open
    assert.equal(code, 0);
  }
});

it("SCV: a turn whose records cannot be written fails internal_error naming the cause, and the next one too", async () => {
  const rig = await startRig();
  // 64 blocks (32 KiB): the header and a short turn fit; a 20,000-word answer does not.
  const { c, exited } = stdioUnder(64, rig.env);
  try {
    const s = await c.open();
    const ok = await c.turn(s.session_id as string, "hello");
    assert.equal(ok.terminal.type, "turn.completed");
    const r = await c.turn(s.session_id as string, "long answer 20000");
    assert.equal(r.terminal.type, "turn.failed");
    assert.equal(r.terminal.code, "internal_error");
    assert.match(r.terminal.message as string, /^the session could not be written to disk: /);
    assert.match(r.terminal.message as string, EFBIG_FIX);
    // The file is at its limit now: the next prompt's own record cannot be written, and says so.
    const next = await c.turn(s.session_id as string, "hello again");
    assert.equal(next.terminal.type, "turn.failed");
    assert.match(next.terminal.message as string, EFBIG_FIX);
  } finally {
    c.end();
    const code = await exited;
    await rig.fake.close(); // before asserting: a failed assertion must not leave the fake provider holding the test open
    assert.equal(code, 0);
  }
});

it("SCV: resuming a stored session whose lease cannot be written names the cause, not 'not found'", async () => {
  const rig = await startRig();
  // The fake provider closes whatever fails: an assertion must not leave it holding the test open.
  try {
    const first = stdioUnder(1024, rig.env);
    let sessionId: string;
    try {
      sessionId = (await first.c.open()).session_id as string;
      assert.equal((await first.c.turn(sessionId, "hello")).terminal.type, "turn.completed");
    } finally {
      first.c.end();
    }
    assert.equal(await first.exited, 0);
    const { c, exited } = stdioUnder(0, rig.env);
    try {
      await c.initialize();
      const id = c.request({ type: "session.start", cwd: rig.home, resume: sessionId });
      const r = await c.reply(id, ["session.started"]);
      assert.equal(r.code, "internal_error");
      assert.match(r.message as string, /^the session could not be opened: /);
      assert.match(r.message as string, EFBIG_FIX);
    } finally {
      c.end();
    }
    assert.equal(await exited, 0);
  } finally {
    await rig.fake.close();
  }
});

it("service: session.create answers session_unavailable (fixed text) and stderr names the cause and fix", async () => {
  const rig = await startRig();
  const svc = new ServiceProcess({ home: rig.home, exec: true, bin: "/bin/sh", args: limited(0, MAGI_BIN, ["--app", "service"]) });
  try {
    await svc.initialize();
    const r = await svc.request("session.create", {});
    assert.equal(r.error?.code, "session_unavailable");
    assert.equal(r.error?.message, "The session is unavailable.");
    svc.child.stdin.end();
    await svc.exited;
    assert.match(svc.stderr, /^berth service: session\.create failed: .*\(EFBIG\); raise it \(ulimit -f\) and retry$/m);
  } finally {
    svc.child.kill();
    await rig.fake.close();
  }
});

it("service: a turn whose records cannot be written ends failed, and stderr names the cause and fix", async () => {
  const rig = await startRig();
  // 16 blocks (8 KiB): the session's header fits; a 2,500-word answer (~12 KB: inside the app-service text bound)
  // does not.
  const svc = new ServiceProcess({ home: rig.home, exec: true, bin: "/bin/sh", args: limited(16, MAGI_BIN, ["--app", "service"]) });
  try {
    await svc.initialize();
    const created = await svc.request("session.create", {});
    const sid = created.payload.session_id as string;
    const started = await svc.request("turn.start", { prompt: "long answer 2500" }, { session_id: sid });
    const turnId = started.payload.turn_id as string;
    const m = await svc.waitStderr(/^berth service: turn (\S+) failed: (.*)$/m);
    assert.equal(m[1], turnId);
    assert.match(m[2]!, /^the session could not be written to disk: .*\(EFBIG\); raise it \(ulimit -f\) and retry$/);
    svc.child.stdin.end();
    await svc.exited;
    const terminal = svc.lines.map((l) => JSON.parse(l) as Record<string, any>).find((r) => r.event === "turn.terminal");
    assert.equal(terminal?.payload?.status, "failed");
  } finally {
    svc.child.kill();
    await rig.fake.close();
  }
});

it("daemon: a state directory that refuses the lock's owner record stops start-up with the cause, and leaves no lock", async () => {
  const rig = await startRig();
  const scvHome = mkdtempSync(join(tmpdir(), "scv-"));
  const child = spawn("/bin/sh", limited(0, BERTH_BIN, ["daemon"]), { env: childEnv({ ...rig.env, SCV_HOME: scvHome }), stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  try {
    assert.equal(code, 1);
    assert.match(stderr, /^berth daemon: cannot start: a file reached this process's file-size limit \(EFBIG\); raise it \(ulimit -f\) and retry \(state directory /m);
    assert.doesNotMatch(stderr, /another berth daemon|is locked/);
    assert.deepEqual(readdirSync(join(rig.home, "host")).filter((n) => n.startsWith("daemon.")), [], "no lock or owner record is left");
    // Without the limit the next start takes the state directory at once.
    const d = await startDaemon({ ...rig.env, SCV_HOME: scvHome });
    assert.equal(typeof d.ready.scv_socket, "string");
    await d.stop();
  } finally {
    await rig.fake.close();
  }
});
