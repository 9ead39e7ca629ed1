/**
 * `daemon.control` over the daemon's SCV socket, with a real `berth daemon`: every action's replies and errors, the
 * limits of `confirm_ask` at and one past each bound, channel_set/channel_logout persistence (omitted fields keep saved
 * values), a question asked in a connected WeChat account (loopback iLink fake) answered by its owner, a client that
 * never reads not blocking status for others, and `berth build-info`.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { saveWechatCredentials } from "../../src/channels/wechat/credentials.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { childEnv, daemonControl as control, startDaemon, startRig, type Daemon, type Msg, type Rig, type ScvClient } from "./client.js";


describe("daemon.control on the socket", () => {
  let rig: Rig;
  let d: Daemon;
  let c: ScvClient;
  let ilink: FakeIlink;
  let ws: string;

  before(async () => {
    rig = await startRig();
    ilink = await new FakeIlink().start();
    ws = await mkdtemp(join(tmpdir(), "scv-ctl-ws-"));
    d = await startDaemon(rig.env);
    c = await d.connect();
    await c.initialize();
  });
  after(async () => {
    c.end();
    await c.closed;
    assert.equal(await d.stop(), 0);
    await ilink.close();
    await rig.fake.close();
  });

  it("status and reload answer daemon.status without session fields", async () => {
    for (const action of ["status", "reload"]) {
      const r = await control(c, { action });
      assert.equal(r.type, "daemon.status");
      assert.equal(r.status.pid, d.child.pid);
      assert.equal(typeof r.status.version, "string");
      assert.deepEqual(r.status.components, []);
      assert.deepEqual(r.status.delegations, { active: 0, reaped: 0 });
      assert.ok(!("session_id" in r) && !("seq" in r));
    }
  });

  it("refuses unknown actions (invalid_json), bad fields (invalid_request) and each action's own errors", async () => {
    assert.equal((await control(c, { action: "frobnicate" })).code, "invalid_json");
    assert.equal((await control(c, { action: "channel_set", channel: "wechat", enabled: "yes" })).code, "invalid_request");
    assert.equal((await control(c, { action: "channel_set", enabled: true })).code, "invalid_request");
    const unknown = await control(c, { action: "channel_set", channel: "telegram", account: "default", enabled: true });
    assert.equal(unknown.code, "component_error");
    assert.equal(unknown.message, "unknown channel in `command.channel`: use wechat or feishu (lark is feishu)");
    assert.equal((await control(c, { action: "channel_logout", channel: "irc", account: "default" })).code, "component_error");
    assert.equal((await control(c, { action: "channel_set", channel: "wechat", account: "../x", enabled: true })).code, "component_error");
    assert.equal((await control(c, { action: "channel_set", channel: "wechat", workspace: "relative/dir" })).code, "component_error");
    assert.equal((await control(c, { action: "delegation_kill", orphans: false })).code, "delegation_error");
    assert.equal((await control(c, { action: "delegation_kill", handle: "codex-nope" })).code, "delegation_error");
    const none = await control(c, { action: "delegation_kill", orphans: true });
    assert.deepEqual(none.status.delegations.killed, []);
    assert.deepEqual((await control(c, { action: "delegations", all: true })).status.delegations.entries, []);
    const restart = await control(c, { action: "restart_when_idle", version: "9.9.9" });
    assert.equal(restart.code, "restart_error");
    assert.match(restart.message, /--supervised|systemd/);
    // max_wait_seconds bounds: 3600 passes validation (then restart_error, as above); 0 and 3601 are invalid_request.
    assert.equal((await control(c, { action: "restart_when_idle", max_wait_seconds: 3600 })).code, "restart_error");
    for (const v of [0, 3601]) {
      const r = await control(c, { action: "restart_when_idle", max_wait_seconds: v });
      assert.deepEqual([r.code, r.message], ["invalid_request", "`command.max_wait_seconds` must be an integer from 1 to 3600"]);
    }
    const t = await control(c, { action: "confirm_ask", question: "ok?", timeout_seconds: 14_401 });
    assert.deepEqual([t.code, t.message], ["invalid_request", "`command.timeout_seconds` must be an integer from 1 to 14400"]);
    assert.equal((await control(c, { action: "confirm_status", id: "5f0c9a1e2b3d" })).code, "confirm_error");
    // confirm_ask bounds: 4096 bytes and 14400 s pass validation (then no owner chat → confirm_error); one past → invalid_request.
    const at = await control(c, { action: "confirm_ask", question: "é".repeat(2048), timeout_seconds: 14_400 });
    assert.equal(at.code, "confirm_error");
    assert.match(at.message, /no owner chat/);
    const long = await control(c, { action: "confirm_ask", question: "é".repeat(2048) + "x" });
    assert.deepEqual([long.code, long.message], ["invalid_request", "`command.question` exceeds 4096 bytes; shorten it"]);
    assert.equal((await control(c, { action: "confirm_ask", question: "ok?", timeout_seconds: 14_401 })).code, "invalid_request");
    assert.equal((await control(c, { action: "confirm_ask", question: "ok?", timeout_seconds: 0 })).code, "invalid_request");
    assert.equal((await control(c, { action: "confirm_ask", question: "" })).code, "invalid_request");
  });

  it("channel_set persists only present fields; channel_logout joins and removes the account", async () => {
    const home = rig.home;
    await mkdir(join(home, "channels"), { recursive: true, mode: 0o700 });
    await writeFile(join(home, "channels", "settings.json"), JSON.stringify({ endpoints: { wechat: { api: ilink.base, cdn: ilink.cdnBase } } }), { mode: 0o600 });
    await saveWechatCredentials(join(home, "channels", "wechat", "default.json"), {
      bot_token: ilink.token,
      bot_id: ilink.botId,
      user_id: ilink.ownerId,
      base_url: ilink.base,
      cdn_url: ilink.cdnBase,
      saved_unix_seconds: 0,
    });
    const set = await control(c, { action: "channel_set", channel: "wechat", account: "default", enabled: false, workspace: ws, remote_tools: "owner" });
    assert.equal(set.type, "daemon.status");
    assert.equal(set.status.components[0].id, "wechat:default");
    assert.equal(set.status.components[0].state, "disabled");
    const saved = async (): Promise<Msg> => (JSON.parse(await readFile(join(home, "channels", "settings.json"), "utf8")) as Msg).accounts.wechat.default;
    assert.deepEqual(await saved(), { enabled: false, workspace: ws, remote_tools: "owner", senders: "owner" });
    // Omitted and null fields keep the saved values.
    const on = await control(c, { action: "channel_set", channel: "wechat", account: "default", enabled: true, workspace: null });
    assert.equal(on.type, "daemon.status");
    assert.deepEqual(await saved(), { enabled: true, workspace: ws, remote_tools: "owner", senders: "owner" });
    const comp = on.status.components[0];
    assert.ok(["starting", "connected"].includes(comp.state), comp.state);
    assert.ok(!JSON.stringify(on).includes(ilink.token), "no credential in status");

    // The owner chat is now reachable: confirm_ask replies at once with a pending question, then the owner answers.
    let asked: Msg | null = null;
    const deadline = Date.now() + 60_000;
    while (asked === null || asked.code === "confirm_error") {
      if (Date.now() > deadline) throw new Error(`confirm_ask never found the owner chat: ${JSON.stringify(asked)}`);
      asked = await control(c, { action: "confirm_ask", question: "Publish 1.0?", timeout_seconds: 600 });
      if (asked.code === "confirm_error") await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(asked.type, "daemon.status");
    const q = asked.status.confirm;
    assert.equal(q.state, "pending");
    assert.equal(q.chat, "wechat:default");
    assert.match(q.id, /^[0-9a-f]{12}$/);
    assert.equal(typeof q.deadline_unix_seconds, "number");
    await ilink.waitSent((s) => s.some((m) => (m.text ?? "").includes("Publish 1.0?")));
    const second = await control(c, { action: "confirm_ask", question: "And 2.0?" });
    assert.equal(second.code, "confirm_error");
    assert.match(second.message, /already waits/);
    ilink.push(ilink.text(ilink.ownerId, "yes"));
    let st: Msg;
    for (;;) {
      st = await control(c, { action: "confirm_status", id: q.id });
      if (st.status?.confirm?.state !== "pending") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(st.status.confirm.state, "yes");

    const out = await control(c, { action: "channel_logout", channel: "wechat", account: "default" });
    assert.equal(out.type, "daemon.status");
    assert.deepEqual(out.status.components, []);
    assert.equal(existsSync(join(home, "channels", "wechat", "default.json")), false);
    assert.equal((await saved()) ?? null, null);
  });

  it("a client that never reads cannot block status for others", async () => {
    const stuck = connect(d.socket);
    await new Promise<void>((r) => stuck.once("connect", () => r()));
    stuck.on("error", () => undefined);
    stuck.pause();
    const lines = [JSON.stringify({ type: "initialize", request_id: "i", protocol_version: 3 })];
    for (let i = 0; i < 4000; i++) lines.push(JSON.stringify({ type: "daemon.control", request_id: `s${i}`, command: { action: "status" } }));
    stuck.write(lines.join("\n") + "\n");
    const other = await d.connect();
    await other.initialize();
    for (let i = 0; i < 3; i++) assert.equal((await control(other, { action: "status" })).type, "daemon.status");
    other.end();
    await other.closed;
    stuck.destroy();
  });
});

it("berth build-info prints {version, commit}", async () => {
  const child = spawn(process.execPath, [BERTH_BIN, "build-info"], { env: childEnv({}), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (b: Buffer) => (out += b.toString()));
  assert.equal(await new Promise((r) => child.once("close", r)), 0);
  const info = JSON.parse(out) as Msg;
  const pkg = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as Msg;
  assert.equal(info.version, pkg.version);
  assert.ok(info.commit === null || /^[0-9a-f]{7,40}$/.test(info.commit as string));
  assert.deepEqual(Object.keys(info).sort(), ["commit", "version"]);
});

it("a delegated run (SCV_PARENT set) cannot change chat accounts through berth channel", async () => {
  const home = await mkdtemp(join(tmpdir(), "scv-ctl-deleg-"));
  const child = spawn(process.execPath, [BERTH_BIN, "channel", "set", "wechat", "--enable"], {
    env: childEnv({ MC_HOME: home, SCV_PARENT: "0a1b2c3d/s1/berth-3f9a2c", SCV_DELEGATION_DEPTH: "1" }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr.on("data", (b: Buffer) => (err += b.toString()));
  assert.equal(await new Promise((r) => child.once("close", r)), 1);
  assert.match(err, /delegated agent run/);
  assert.equal(existsSync(join(home, "channels", "settings.json")), false);
});

describe("restart_when_idle under a supervisor", () => {
  it("refuses another version, plans the installed one, waits for the parent delegation, then exits 75", async () => {
    const rig = await startRig();
    const scvHome = await mkdtemp(join(tmpdir(), "scv-restart-"));
    const d = spawn(process.execPath, [BERTH_BIN, "daemon", "--supervised"], { env: childEnv({ ...rig.env, SCV_HOME: scvHome }), stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    d.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((r) => d.once("close", (code) => r(code)));
    const sleeper = spawn("sleep", ["300"], { stdio: "ignore" });
    try {
      const ready = await new Promise<Msg>((resolve, reject) => {
        let out = "";
        d.stdout.on("data", (b: Buffer) => {
          out += b.toString();
          const i = out.indexOf("\n");
          if (i >= 0) resolve(JSON.parse(out.slice(0, i)) as Msg);
        });
        void exited.then((code) => reject(new Error(`daemon exited ${code}: ${stderr}`)));
      });
      const sock = connect(ready.scv_socket as string);
      await new Promise<void>((r) => sock.once("connect", () => r()));
      const { ScvClient } = await import("./client.js");
      const c = new ScvClient(sock, sock, () => stderr);
      await c.initialize();
      const pkg = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as Msg;
      const other = await control(c, { action: "restart_when_idle", version: "0.0.0-other" });
      assert.equal(other.code, "restart_error");
      assert.match(other.message, /is .*, not the `command.version` requested; install that version first$/);
      // A live delegation record (owned by this test process) that the plan must wait for.
      const { writeRecord, processStart } = await import("../../src/runtime/delegation/records.js");
      await writeRecord(rig.home, {
        handle: "codex-3f9a2c",
        agent: "codex",
        instance: "0a1b2c3d",
        session: "s1",
        depth: 1,
        pid: sleeper.pid!,
        pid_start: await processStart(sleeper.pid!),
        owner_pid: process.pid,
        owner_start: await processStart(process.pid),
        cwd: rig.home,
        started_unix_seconds: 0,
      });
      const parent = "0a1b2c3d/s1/codex-3f9a2c";
      const planned = await control(c, { action: "restart_when_idle", version: pkg.version, parent, max_wait_seconds: 600 });
      assert.equal(planned.type, "daemon.status");
      assert.equal(planned.status.restart.to_version, pkg.version);
      assert.equal(planned.status.restart.waiting_for, "delegation codex-3f9a2c");
      assert.equal(planned.status.restart.requester, parent);
      assert.equal(planned.status.restart.origin, null, "no chat runs session s1");
      const again = await control(c, { action: "restart_when_idle", version: pkg.version, max_wait_seconds: 10 });
      assert.deepEqual(again.status.restart, planned.status.restart, "a repeat returns the scheduled plan");
      assert.equal(d.exitCode, null);
      sleeper.kill("SIGKILL");
      await new Promise((r) => sleeper.once("close", r));
      assert.equal(await exited, 75);
      assert.match(stderr, /restarting into/);
      sock.destroy();
    } finally {
      if (sleeper.exitCode === null) sleeper.kill("SIGKILL");
      if (d.exitCode === null) d.kill("SIGKILL");
      await rig.fake.close();
    }
  });
});
