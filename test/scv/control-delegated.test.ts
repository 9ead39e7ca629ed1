/**
 * The daemon refuses `daemon.control` management (channel_set, channel_logout, delegation_kill) from a delegated
 * agent run over its socket, whatever the client sends: a process started with `SCV_PARENT`, a child it started
 * with the variable removed, and a recorded agent process that never had the variable. Status, delegation lists
 * and questions stay open to them; an ordinary process is not refused.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseSs } from "../../src/cli/daemon-peer.js";
import { processStart, writeRecord } from "../../src/runtime/delegation/records.js";
import { childEnv, startDaemon, startRig, type Daemon, type Msg, type Rig } from "./client.js";

/** A control client: connects, sends each command, prints the replies as one JSON array. `spawn` mode first
 * starts a copy of itself with SCV_PARENT removed and waits for it; `hold` mode prints its PID, then waits for a
 * line on stdin before connecting. */
const CLIENT = String.raw`
const net = require("node:net");
const { spawn } = require("node:child_process");
const [sock, mode, cmds] = process.argv.slice(2);
if (mode === "spawn") {
  const env = { ...process.env };
  delete env.SCV_PARENT;
  const c = spawn(process.execPath, [__filename, sock, "direct", cmds], { env, stdio: ["ignore", "inherit", "inherit"] });
  c.on("close", (code) => process.exit(code ?? 1));
} else {
  const go = () => {
    const list = JSON.parse(cmds);
    const s = net.connect(sock);
    const replies = {};
    let buf = "";
    s.setEncoding("utf8");
    s.write(JSON.stringify({ type: "initialize", request_id: "i", protocol_version: 3, client: { name: "t", version: "1" } }) + "\n");
    list.forEach((command, i) => s.write(JSON.stringify({ type: "daemon.control", request_id: "c" + i, command }) + "\n"));
    s.on("data", (d) => {
      buf += d;
      let k;
      while ((k = buf.indexOf("\n")) >= 0) {
        const m = JSON.parse(buf.slice(0, k));
        buf = buf.slice(k + 1);
        if (typeof m.request_id === "string" && m.request_id.startsWith("c")) replies[m.request_id] = m;
      }
      if (Object.keys(replies).length === list.length) {
        process.stdout.write(JSON.stringify(list.map((_, i) => replies["c" + i])) + "\n");
        s.end();
      }
    });
  };
  if (mode === "hold") {
    process.stdout.write(process.pid + "\n");
    process.stdin.once("data", () => {
      process.stdin.destroy();
      go();
    });
  } else go();
}
`;

describe("daemon.control refuses management from delegated runs", () => {
  let rig: Rig;
  let d: Daemon;
  let script: string;
  const manage: Msg[] = [
    { action: "channel_set", channel: "wechat", account: "default", enabled: true },
    { action: "channel_logout", channel: "feishu", account: "default" },
    { action: "delegation_kill", handle: "codex-nope" },
  ];
  const open: Msg[] = [{ action: "status" }, { action: "delegations", all: true }, { action: "confirm_status", id: "5f0c9a1e2b3d" }];

  before(async () => {
    rig = await startRig();
    d = await startDaemon(rig.env);
    script = join(await mkdtemp(join(tmpdir(), "scv-peer-")), "client.cjs");
    await writeFile(script, CLIENT);
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    await rig.fake.close();
  });

  async function run(mode: "direct" | "spawn", env: Record<string, string>, cmds: Msg[]): Promise<Msg[]> {
    const c = spawn(process.execPath, [script, d.socket, mode, JSON.stringify(cmds)], { env: childEnv(env), stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    c.stdout.setEncoding("utf8");
    c.stdout.on("data", (s: string) => (out += s));
    assert.equal(await new Promise((r) => c.once("close", r)), 0);
    return JSON.parse(out) as Msg[];
  }

  function assertRefused(replies: Msg[]): void {
    assert.deepEqual(
      replies.map((r) => r.code),
      ["component_error", "component_error", "delegation_error"],
    );
    for (const r of replies) assert.match(r.message, /a delegated agent run cannot manage the daemon .*ask the user/);
    assert.equal(existsSync(join(rig.home, "channels", "settings.json")), false, "nothing was saved");
  }

  it("refuses a client started with SCV_PARENT, but answers its status, list and question queries", async () => {
    assertRefused(await run("direct", { SCV_PARENT: "0a1b2c3d/s1/codex-1" }, manage));
    const replies = await run("direct", { SCV_PARENT: "0a1b2c3d/s1/codex-1" }, open);
    assert.deepEqual(
      replies.map((r) => r.type === "daemon.status" || /unknown question ID/.test(r.message)),
      [true, true, true],
    );
  });

  it("refuses a child that a delegated process started with SCV_PARENT removed", async () => {
    assertRefused(await run("spawn", { SCV_PARENT: "0a1b2c3d/s1/codex-1" }, manage));
  });

  it("refuses a recorded agent process that never carried SCV_PARENT", async () => {
    const c = spawn(process.execPath, [script, d.socket, "hold", JSON.stringify(manage)], { env: childEnv({}), stdio: ["pipe", "pipe", "inherit"], detached: true });
    let out = "";
    c.stdout.setEncoding("utf8");
    const pid = await new Promise<number>((r) =>
      c.stdout.on("data", (s: string) => {
        out += s;
        if (out.includes("\n") && !out.startsWith("[")) r(Number(out.split("\n")[0]));
      }),
    );
    await writeRecord(rig.home, {
      handle: "codex-77aa01",
      agent: "codex",
      instance: "0a1b2c3d",
      session: "s1",
      depth: 1,
      pid,
      pid_start: await processStart(pid),
      owner_pid: process.pid,
      owner_start: await processStart(process.pid),
      cwd: rig.home,
      started_unix_seconds: 0,
    });
    const closed = new Promise((r) => c.once("close", r));
    c.stdin.end("go\n");
    assert.equal(await closed, 0);
    assertRefused(JSON.parse(out.split("\n")[1]!) as Msg[]);
  });

  it("does not refuse an ordinary client", async () => {
    const replies = await run("direct", {}, [{ action: "delegation_kill", handle: "codex-nope" }]);
    assert.equal(replies[0]!.code, "delegation_error");
    assert.match(replies[0]!.message, /no delegated run has the `command.handle` given/);
  });
});

it("parseSs reads inode pairs and holders from ss -xpn, paths with spaces included", () => {
  const out = [
    "Netid State Recv-Q Send-Q Local Address:Port    Peer Address:Port   Process",
    'u_str ESTAB 0      0      /tmp/my home/state/server.sock 1400092            * 1400093 users:(("node",pid=8787,fd=22))',
    'u_str ESTAB 0      0                  * 1400093            * 1400092 users:(("node",pid=8811,fd=3),("node",pid=8812,fd=3))',
    "u_str ESTAB 0      0                  * 1400100            * 1400101",
    "garbage line",
  ].join("\n");
  assert.deepEqual(parseSs(out), [
    { local: "1400092", peer: "1400093", pids: [8787] },
    { local: "1400093", peer: "1400092", pids: [8811, 8812] },
    { local: "1400100", peer: "1400101", pids: [] },
  ]);
});
