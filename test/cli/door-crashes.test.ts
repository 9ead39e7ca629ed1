/**
 * Finding: an uncaught exception or unhandled rejection ended `berth stdio`, `berth service` and `berth acp` (only the
 * daemon contained them), losing every session of the client and its turns in flight. Each door now logs one line
 * naming it a bug on stderr (never on stdout, the protocol channel) and keeps serving.
 *
 * The failure is injected from outside the code under test, as the daemon's test does: a `--import` preload that, on
 * SIGUSR2, leaves a rejection unhandled and throws from a timer callback inside the door's process. Their messages
 * carry a bearer token and a terminal escape, which the log must neither show nor obey.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { until } from "../host/helpers.js";
import { BERTH_BIN } from "../helpers/paths.js";

const TOKEN = "Bearer abcdefghijklmnop0123456789";
// It also counts the process's writes to stderr into the file $DOOR_CRASH_WRITES: a door spinning on its own log
// (its stderr reader gone) writes without end.
const COUNT = `import{writeFileSync}from"node:fs";let n=0;const w=process.stderr.write.bind(process.stderr);process.stderr.write=(...a)=>{writeFileSync(process.env.DOOR_CRASH_WRITES,String(++n));return w(...a)};`;
const INJECT = `data:text/javascript,${COUNT}process.on("SIGUSR2",()=>{Promise.reject(new Error("injected rejection ${TOKEN} \\u001b]0;pwned\\u0007"));setImmediate(()=>{throw new Error("injected throw")})})`;

type Msg = Record<string, unknown>;
interface Door {
  name: string;
  handshake: Msg;
  /** A request after the injection, and how its (successful) answer is recognised. */
  request: (cwd: string, id: number) => Msg;
  answers: (m: Msg, id: number) => boolean;
  isHandshakeReply: (m: Msg) => boolean;
}

const DOORS: Door[] = [
  {
    name: "stdio",
    handshake: { type: "initialize", request_id: "1", protocol_version: 3, client: { name: "berth-test", version: "0" } },
    isHandshakeReply: (m) => m.request_id === "1" && m.type === "initialized",
    request: (cwd, id) => ({ type: "session.start", request_id: String(id), cwd }),
    answers: (m, id) => m.request_id === String(id) && m.type === "session.started",
  },
  {
    name: "service",
    handshake: { protocol_version: 1, kind: "request", request_id: "1", method: "initialize", payload: { supported_protocol_versions: [1] } },
    isHandshakeReply: (m) => m.request_id === "1" && m.kind === "response" && m.error === null,
    request: (_cwd, id) => ({ protocol_version: 1, kind: "request", request_id: String(id), method: "session.list", payload: {} }),
    answers: (m, id) => m.request_id === String(id) && m.kind === "response" && m.error === null,
  },
  {
    name: "acp",
    handshake: { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } },
    isHandshakeReply: (m) => m.id === 1 && m.result !== undefined,
    request: (_cwd, id) => ({ jsonrpc: "2.0", id, method: "session/list", params: {} }),
    answers: (m, id) => m.id === id && Array.isArray((m.result as Msg | undefined)?.sessions),
  },
];

interface Running {
  child: ChildProcessWithoutNullStreams;
  frames: Msg[];
  stderr: () => string;
  send: (m: Msg) => void;
}

function start(door: Door): Running & { writes: () => number } {
  const home = mkdtempSync(join(tmpdir(), "door-crash-"));
  const count = join(home, "stderr-writes");
  const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: home, MC_HOME: home, DOOR_CRASH_WRITES: count };
  const child = spawn(process.execPath, ["--import", INJECT, BERTH_BIN, door.name], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  const frames: Msg[] = [];
  let buf = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let k; (k = buf.indexOf("\n")) !== -1; buf = buf.slice(k + 1)) frames.push(JSON.parse(buf.slice(0, k)) as Msg);
  });
  let err = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (err += d));
  child.stdin.on("error", () => undefined);
  const writes = (): number => (existsSync(count) ? Number(readFileSync(count, "utf8")) : 0);
  return { child, frames, stderr: () => err, send: (m) => void child.stdin.write(JSON.stringify(m) + "\n"), writes };
}

async function ended(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

for (const door of DOORS) {
  test(`finding: a stray rejection or exception ended berth ${door.name}; it is logged once as a bug and the door keeps serving`, { timeout: 120_000 }, async (t) => {
    const r = start(door);
    t.after(() => void r.child.kill("SIGKILL"));
    r.send(door.handshake);
    await until(() => r.frames.some(door.isHandshakeReply) || r.child.exitCode !== null, 60_000, "the handshake reply");
    r.child.kill("SIGUSR2");
    const logged = (): boolean => /bug: unhandled rejection contained: Error: injected rejection/.test(r.stderr()) && /bug: uncaught exception contained: Error: injected throw/.test(r.stderr());
    await until(() => logged() || r.child.exitCode !== null, 60_000, "both failures logged");
    assert.equal(r.child.exitCode, null, `berth ${door.name} ended: ${r.stderr()}`);
    assert.equal(r.stderr().match(/bug: /g)?.length, 2, "each failure logged once");
    assert.match(r.stderr(), new RegExp(`berth ${door.name}: bug: unhandled rejection contained: Error: injected rejection Bearer \\[REDACTED\\] \\^\\[\\]0;pwned\\^G`));
    assert.ok(!r.stderr().includes(TOKEN) && !r.stderr().includes("\u001b"), "no credential, no terminal control on stderr");
    assert.ok(r.frames.every((f) => !JSON.stringify(f).includes("injected")), "nothing of it on stdout, the protocol channel");
    r.send(door.request(mkdtempSync(join(tmpdir(), "door-crash-cwd-")), 2));
    await until(() => r.frames.some((m) => door.answers(m, 2)) || r.child.exitCode !== null, 60_000, "the answer to a request after the failures");
    assert.ok(r.frames.some((m) => door.answers(m, 2)), `no answer: ${JSON.stringify(r.frames.slice(-3))} ${r.stderr()}`);
    r.child.stdin.end();
    assert.equal(await ended(r.child), 0, "EOF still ends it cleanly");
  });

  // With its stderr reader gone, logging fails (EPIPE): that failure must not be reported in turn, without end.
  test(`berth ${door.name} with stderr closed: a contained failure is logged once, not in a loop, and the door still answers`, { timeout: 120_000 }, async (t) => {
    const r = start(door);
    t.after(() => void r.child.kill("SIGKILL"));
    r.send(door.handshake);
    await until(() => r.frames.some(door.isHandshakeReply) || r.child.exitCode !== null, 60_000, "the handshake reply");
    r.child.stderr.destroy();
    const before = r.writes();
    r.child.kill("SIGUSR2");
    await until(() => r.writes() >= before + 2 || r.child.exitCode !== null, 60_000, "both failures logged");
    // Two requests answered in turn (any answer: `berth stdio` refuses a second session), many event-loop turns after
    // the failed log writes, time for a loop to show.
    for (const id of [2, 3]) {
      r.send(door.request(mkdtempSync(join(tmpdir(), "door-crash-cwd-")), id));
      const replied = (m: Msg): boolean => m.id === id || m.request_id === String(id);
      await until(() => r.frames.some(replied) || r.child.exitCode !== null, 60_000, "the answer to a request after the failures");
      assert.equal(r.child.exitCode, null, `berth ${door.name} ended`);
    }
    assert.equal(r.writes(), before + 2, "one log write per failure");
    r.child.stdin.end();
    assert.equal(await ended(r.child), 0);
  });
}
