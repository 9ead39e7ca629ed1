import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AhpClient, FakeBackend, berthHomeFor, tempHome, until } from "./helpers.js";
import { listenFailure, type HostHandle } from "../../src/protocols/host/host.js";
import { startFakeProvider } from "../fakes/fake-provider.js";

const bin = fileURLToPath(new URL("../../../bin/berth", import.meta.url));

interface Daemon {
  proc: ChildProcess;
  ready: Record<string, string>;
  stdout: string[];
  stderr: string;
}
/** `listen`: the `--listen` value (null: none, the daemon's default). */
function startDaemon(home: string, args: string[] = [], env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = [], listen: string | null = "127.0.0.1:0"): Promise<Daemon> {
  const proc = spawn(process.execPath, [...nodeArgs, bin, "daemon", ...(listen !== null ? ["--listen", listen] : []), ...args], { env: { ...process.env, BERTH_HOME: home, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const d: Daemon = { proc, ready: {}, stdout: [], stderr: "" };
  proc.stderr.on("data", (b: Buffer) => (d.stderr += b.toString()));
  return new Promise((resolve, reject) => {
    let buf = "";
    proc.stdout.on("data", (b: Buffer) => {
      buf += b.toString();
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const l of lines) {
        d.stdout.push(l);
        if (d.stdout.length === 1) {
          d.ready = JSON.parse(l);
          resolve(d);
        }
      }
    });
    proc.once("exit", (code) => reject(new Error(`daemon exited ${code}: ${d.stderr}`)));
  });
}
const asHandle = (d: Daemon): HostHandle => ({ ahpUrl: d.ready.ahp, httpUrl: d.ready.http, token: d.ready.token, backendSocket: d.ready.backend_socket }) as unknown as HostHandle;
const exited = (p: ChildProcess) => new Promise<number | null>((r) => (p.exitCode !== null ? r(p.exitCode) : p.once("exit", (c) => r(c))));

test("berth daemon: ready line, owner-only state, exclusive lock, SIGTERM, crash-restart restores sessions", async () => {
  const home = tempHome();
  const d = await startDaemon(home);
  assert.deepEqual(Object.keys(d.ready), ["ready", "ahp", "http", "token", "backend_socket", "scv_socket", "ui"]);
  assert.equal(d.ready.ready, true as unknown as string);
  assert.match(d.ready.ahp ?? "", /^ws:\/\/127\.0\.0\.1:\d+\/ahp$/);
  assert.equal(statSync(join(home, "host")).mode & 0o777, 0o700);
  assert.equal(statSync(join(home, "host", "token")).mode & 0o777, 0o600);
  // A second daemon on the same state directory is refused and never replaces the live listener.
  const second = spawn(process.execPath, [bin, "daemon"], { env: { ...process.env, BERTH_HOME: home }, stdio: ["ignore", "pipe", "pipe"] });
  let out2 = "";
  second.stdout.on("data", (b: Buffer) => (out2 += b.toString()));
  assert.notEqual(await exited(second), 0);
  assert.equal(out2, "");

  const h = asHandle(d);
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "persist", title: "Kept", history: [{ id: "h1", userText: "u", responseText: "r" }] });
  be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "live", turnId: "L" } });
  be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "answer" } });
  be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
  const { c, result: first } = await AhpClient.init(h, [reg.chat]);
  // The turn is complete in the daemon's state (snapshot or live action); a later round trip
  // proves the store's end-of-turn commit (same event-loop turn as the reduction) has run.
  const settled = (first.snapshots[0].state.turns as Array<{ id: string }>).some((t) => t.id === "L");
  if (!settled) await c.action((e) => e.action.type === "chat/turnComplete");
  assert.equal((await c.request("ping", {})).result, null);
  c.close();
  d.proc.kill("SIGKILL"); // crash: stale socket and lock are left behind
  await exited(d.proc);
  const d2 = await startDaemon(home);
  assert.equal(d2.ready.token, d.ready.token, "token created once");
  // The dead owner's lock was taken over at once (PID check), not after the 5 s staleness window.
  await until(() => /lock owner \(pid \d+\) is gone; taking the lock over/.test(d2.stderr), 3000, "takeover log line");
  const h2 = asHandle(d2);
  const { c: c2, result } = await AhpClient.init(h2, [reg.chat, reg.session]);
  const chat = result.snapshots.find((s: any) => s.resource === reg.chat);
  assert.deepEqual(chat.state.turns.map((t: any) => t.id), ["h1", "L"]);
  const re = await FakeBackend.session(h2, { protocolVersion: 3, sourceId: "persist" });
  assert.equal(re.reg.session, reg.session);
  assert.equal(re.reg.sourceContinuity, reg.sourceContinuity);
  assert.equal(re.reg.sourceCursor, "L");
  assert.equal(re.reg.hostId, reg.hostId);
  re.be.close();
  c2.close();
  d2.proc.kill("SIGTERM");
  assert.equal(await exited(d2.proc), 0);
  assert.equal(d2.stdout.length, 1, "exactly one stdout line");
});

test("berth daemon --berth-runtime: provider berth is registered before the ready line; a prompt round-trips", async () => {
  const fake = await startFakeProvider();
  try {
    const home = berthHomeFor(fake);
    const env: NodeJS.ProcessEnv = { MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
    for (const k of Object.keys(process.env)) if (k.includes("API_KEY")) env[k] = "";
    const d = await startDaemon(home, ["--berth-runtime"], env);
    const h = asHandle(d);
    const { c, result } = await AhpClient.init(h, ["ahp-root://"]);
    assert.deepEqual(result.snapshots[0].state.agents.map((a: { provider: string }) => a.provider), ["berth"]);
    assert.equal((await c.request("createSession", { channel: "ahp-session:/d1", provider: "berth" })).result, null);
    const snap = (await c.request("subscribe", { channel: "ahp-session:/d1" })).result.snapshot;
    if (snap.state.lifecycle !== "ready") await c.action((e) => e.action.type === "session/ready", "ready", 10_000);
    const chat: string = snap.state.defaultChat;
    await c.request("subscribe", { channel: chat });
    c.dispatch(chat, { type: "chat/turnStarted", turnId: "x1", startedAt: new Date().toISOString(), message: { text: "ping", origin: { kind: "user" } } });
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "x1", "turn complete", 15_000);
    const text = c
      .actions(chat)
      .filter((e) => e.action.turnId === "x1" && (e.action.type === "chat/responsePart" || e.action.type === "chat/delta"))
      .map((e) => (e.action.type === "chat/delta" ? e.action.content : e.action.part.content))
      .join("");
    assert.equal(text, "echo: ping");
    assert.deepEqual(c.invalid, []);
    c.close();
    d.proc.kill("SIGTERM");
    assert.equal(await exited(d.proc), 0);
  } finally {
    await fake.close();
  }
});

test("finding: an unhandled rejection or exception anywhere killed the daemon; it is logged and contained", async () => {
  // Injected from outside the code under test: a preload that, on SIGUSR2, leaves a rejection
  // unhandled and throws from a timer callback inside the daemon process.
  const inject = `data:text/javascript,process.on("SIGUSR2",()=>{Promise.reject(new Error("injected rejection"));setImmediate(()=>{throw new Error("injected throw")})})`;
  const d = await startDaemon(tempHome(), [], {}, ["--import", inject]);
  d.proc.kill("SIGUSR2");
  await until(() => /bug: unhandled rejection contained: Error: injected rejection/.test(d.stderr) && /bug: uncaught exception contained: Error: injected throw/.test(d.stderr), 5000, "both contained and logged");
  assert.deepEqual(await (await fetch(`${d.ready.http}/healthz`)).json(), { ok: true });
  d.proc.kill("SIGTERM");
  assert.equal(await exited(d.proc), 0);
});

test("berth daemon: a --listen port already taken exits 1 at once with the fix, leaving no socket or lock behind", async () => {
  const home = tempHome();
  const taken = createServer();
  await new Promise<void>((r) => taken.listen(0, "127.0.0.1", () => r()));
  const port = (taken.address() as AddressInfo).port;
  try {
    const proc = spawn(process.execPath, [bin, "daemon", "--listen", `127.0.0.1:${port}`], { env: { ...process.env, BERTH_HOME: home }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    proc.stdout.on("data", (b: Buffer) => (out += b.toString()));
    proc.stderr.on("data", (b: Buffer) => (err += b.toString()));
    // A daemon that kept running after the failure (what it did) is killed, and fails the test instead of hanging it.
    const guard = setTimeout(() => proc.kill("SIGKILL"), 20_000);
    const code = await exited(proc);
    clearTimeout(guard);
    assert.equal(code, 1, err);
    assert.equal(out, "", "no ready line");
    assert.equal(
      err.trim(),
      `berth daemon: cannot listen on 127.0.0.1:${port}: another program is listening on that port; choose another with --listen 127.0.0.1:PORT (port 0 picks a free one)`,
    );
    assert.deepEqual(readdirSync(join(home, "host")).sort(), ["host.db", "token"], "no backend socket, no state lock");
    // The next start finds nothing stale to clean up or wait out.
    const d = await startDaemon(home);
    assert.doesNotMatch(d.stderr, /stale|locked/);
    d.proc.kill("SIGTERM");
    assert.equal(await exited(d.proc), 0);
  } finally {
    taken.close();
  }
});

test("--listen without a usable HOST:PORT exits 2 saying what it takes and what it got", () => {
  for (const [args, got] of [
    [["--listen", "localhost:99999"], '; got "localhost:99999"'],
    [["--listen=127.0.0.1"], '; got "127.0.0.1"'],
    [["--listen"], ""],
  ] as const) {
    const r = spawnSync(process.execPath, [bin, "daemon", ...args], { env: { PATH: process.env.PATH, MC_HOME: tempHome() }, encoding: "utf8" });
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stdout, "", "no ready line");
    assert.equal(r.stderr, `berth daemon: --listen needs HOST:PORT with a port from 0 to 65535 (0 picks a free one), such as 127.0.0.1:8080${got}\n`);
  }
});

test("listenFailure names the cause and the fix of each bind error", () => {
  const cases: Array<[string | undefined, string, RegExp]> = [
    ["EADDRNOTAVAIL", "192.0.2.1", /^cannot listen on 192\.0\.2\.1:8080: no network interface of this machine has that address; use 127\.0\.0\.1/],
    ["EACCES", "127.0.0.1", /^cannot listen on 127\.0\.0\.1:8080: this user may not listen on that port \(ports below 1024 need privileges\)/],
    ["ENOTFOUND", "nosuch.invalid", /^cannot listen on nosuch\.invalid:8080: that host name does not resolve; give an IP address/],
    ["EADDRINUSE", "::1", /^cannot listen on \[::1\]:8080: another program is listening on that port; choose another with --listen \[::1\]:PORT/],
    [undefined, "127.0.0.1", /^cannot listen on 127\.0\.0\.1:8080: boom$/],
  ];
  for (const [code, host, re] of cases) {
    const e = listenFailure(Object.assign(new Error("boom"), code !== undefined ? { code } : {}), host, 8080);
    assert.match(e.message, re);
    assert.equal((e as NodeJS.ErrnoException).code, undefined, "no errno code: EACCES here is not a storage problem");
  }
});

test("berth daemon without --listen: the port of its last start when it is free, else a free one; --listen is kept", async () => {
  const home = tempHome();
  const env = { MC_HOME: "" };
  const portOf = (d: Daemon): number => Number(new URL(d.ready.http!).port);
  const stop = async (d: Daemon): Promise<void> => {
    d.proc.kill("SIGTERM");
    assert.equal(await exited(d.proc), 0, d.stderr);
  };
  const first = await startDaemon(home, ["--no-berth-runtime"], env, [], null);
  const port = portOf(first);
  await stop(first);
  // Free: the same port again (an open web UI page reconnects by itself).
  const again = await startDaemon(home, ["--no-berth-runtime"], env, [], null);
  assert.equal(portOf(again), port);
  await stop(again);
  // Taken by another program: a free one, and that one is remembered.
  let other = 0;
  const squatter = createServer();
  await new Promise<void>((r) => squatter.listen(port, "127.0.0.1", () => r()));
  try {
    const moved = await startDaemon(home, ["--no-berth-runtime"], env, [], null);
    other = portOf(moved);
    assert.notEqual(other, port);
    await stop(moved);
  } finally {
    await new Promise<void>((r) => squatter.close(() => r()));
  }
  // An explicit --listen is used as given and not remembered: the next default start goes back to the last one's.
  const explicit = await startDaemon(home, ["--no-berth-runtime"], env, [], `127.0.0.1:${port}`);
  assert.equal(portOf(explicit), port);
  await stop(explicit);
  const last = await startDaemon(home, ["--no-berth-runtime"], env, [], null);
  assert.equal(portOf(last), other);
  await stop(last);
});
