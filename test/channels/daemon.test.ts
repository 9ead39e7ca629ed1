/**
 * The channels as `berth daemon` components, end to end with real processes: a saved WeChat account (pointed at the
 * loopback iLink fake) connects inside the daemon, its sessions run on the daemon's own SCV socket against the fake
 * provider; `berth channel status` shows the live component; an owner's write is auto-approved and lands in the
 * workspace; kill -9 mid-turn then restart sends one failure reply and no second turn; SIGTERM exits 0.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FAILURE_REPLY, TURN_FAILED_REPLY } from "../../src/channels/common/bridge.js";
import type { ComponentStatus } from "../../src/channels/common/status.js";
import { saveWechatCredentials } from "../../src/channels/wechat/credentials.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { fakeSettings } from "../turns/helpers.js";
import { until } from "./helpers.js";

function cleanEnv(home: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(MC_|BERTH_|SCV_)/.test(k)) env[k] = v;
  delete env["ANTHROPIC_API_KEY"];
  delete env["OPENAI_API_KEY"];
  return { ...env, MC_HOME: home, NO_PROXY: "127.0.0.1" };
}

describe("channels in berth daemon", () => {
  let provider: FakeProvider;
  let ilink: FakeIlink;
  let home: string;
  let ws: string;
  let daemon: ChildProcess | null = null;
  let stderr = "";

  async function startDaemon(): Promise<ChildProcess> {
    const d = spawn(process.execPath, [BERTH_BIN, "daemon"], { env: cleanEnv(home), cwd: ws, stdio: ["ignore", "pipe", "pipe"] });
    d.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    await new Promise<void>((resolve, reject) => {
      let out = "";
      d.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        if (out.includes("\n")) resolve();
      });
      d.once("exit", (code) => reject(new Error(`daemon exited ${code}`)));
    });
    daemon = d;
    return d;
  }

  async function status(): Promise<ComponentStatus[]> {
    const child = spawn(process.execPath, [BERTH_BIN, "channel", "status", "--json"], { env: cleanEnv(home), stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    await new Promise((r) => child.once("close", r)); // not "exit": only then is all of stdout read
    return (JSON.parse(out) as { components: ComponentStatus[] }).components;
  }

  before(async () => {
    provider = await startFakeProvider();
    ilink = await new FakeIlink().start();
    home = await mkdtemp(join(tmpdir(), "berth-ch-daemon-"));
    ws = await mkdtemp(join(tmpdir(), "berth-ch-daemon-ws-"));
    await writeFile(join(home, "settings.json"), JSON.stringify(fakeSettings(provider.baseUrl)));
    await mkdir(join(home, "channels"), { recursive: true, mode: 0o700 });
    await writeFile(
      join(home, "channels", "settings.json"),
      JSON.stringify({
        endpoints: { wechat: { api: ilink.base, cdn: ilink.cdnBase } },
        accounts: { wechat: { default: { enabled: true, workspace: ws, remote_tools: "owner", senders: "anyone" } } },
      }),
    );
    await saveWechatCredentials(join(home, "channels", "wechat", "default.json"), {
      bot_token: ilink.token,
      bot_id: ilink.botId,
      user_id: ilink.ownerId,
      base_url: ilink.base,
      cdn_url: ilink.cdnBase,
      saved_unix_seconds: 0,
    });
  });

  after(async () => {
    daemon?.kill("SIGKILL");
    await ilink.close();
    await provider.close();
    await rm(home, { recursive: true, force: true });
    await rm(ws, { recursive: true, force: true });
  });

  it("connects the account, reports it live, answers an owner with tools and a stranger without", async () => {
    await startDaemon();
    let comps: ComponentStatus[] = [];
    await until(async () => {
      comps = await status();
      return comps[0]?.state === "connected";
    });
    assert.equal(comps.length, 1);
    assert.equal(comps[0]!.id, "wechat:default");
    assert.equal(comps[0]!.remote_tools, "owner");
    assert.ok(typeof comps[0]!.last_success_unix_seconds === "number");
    provider.script([
      { steps: [{ toolCall: { id: "call_w", name: "write", arguments: { path: "from-chat.txt", content: "hello from WeChat\n" } } }] },
      { steps: [{ text: "Written." }] },
    ]);
    ilink.push(ilink.text(ilink.ownerId, "write from-chat.txt"));
    await ilink.waitSent((s) => s.length >= 1);
    assert.equal(ilink.sent[0]!.text, "Written.");
    assert.equal(await readFile(join(ws, "from-chat.txt"), "utf8"), "hello from WeChat\n");
    ilink.push(ilink.text("stranger@im.wechat", "hi daemon"));
    await ilink.waitSent((s) => s.length >= 2);
    assert.match(ilink.sent[1]!.text!, /hi daemon/);
  });

  it("a failed turn's chat_attach copies are deleted, never sent", async () => {
    provider.script([
      { steps: [{ toolCall: { id: "call_r", name: "write", arguments: { path: "report.txt", content: "draft\n" } } }] },
      { steps: [{ toolCall: { id: "call_a", name: "chat_attach", arguments: { path: "report.txt" } } }] },
      { steps: [{ streamError: "server_error" }], end: false },
    ]);
    const sent = ilink.sent.length;
    ilink.push(ilink.text(ilink.ownerId, "send me the report"));
    await ilink.waitSent((s) => s.length > sent);
    assert.ok(ilink.sent[sent]!.text!.includes(TURN_FAILED_REPLY), ilink.sent[sent]!.text ?? "");
    assert.equal(await readFile(join(ws, "report.txt"), "utf8"), "draft\n", "the tool calls ran");
    assert.deepEqual(await readdir(join(home, "state", "media", "outbox")), [], "the attached copy was removed");
    // The next reply in that chat comes with no file from the failed turn.
    ilink.push(ilink.text(ilink.ownerId, "anything else?"));
    await ilink.waitSent((s) => s.length > sent + 1);
    assert.match(ilink.sent[sent + 1]!.text!, /anything else/);
    assert.ok(ilink.sent.slice(sent).every((m) => m.item["file_item"] === undefined), "no file was sent");
  });

  it("kill -9 mid-turn, restart: one failure reply, no second turn; SIGTERM exits 0", async () => {
    provider.script([{ waitForAbortBeforeHeaders: true }]);
    const before = provider.requests.length;
    ilink.push(ilink.text("a@im.wechat", "this turn will be interrupted"));
    await provider.waitForRequests(before + 1);
    const d = daemon!;
    const exited = new Promise((r) => d.once("exit", r));
    d.kill("SIGKILL");
    await exited;
    const sent = ilink.sent.length;
    const restarted = await startDaemon();
    await ilink.waitSent((s) => s.length > sent);
    assert.ok(ilink.sent[sent]!.text!.includes(FAILURE_REPLY));
    await until(async () => (await status())[0]?.state === "connected");
    assert.equal(provider.requests.length, before + 1, "the interrupted message never ran again");
    const code = new Promise((r) => restarted.once("exit", r));
    restarted.kill("SIGTERM");
    assert.equal(await code, 0);
    daemon = null;
    assert.ok(!stderr.includes(ilink.token), "the bot token never reaches the daemon's log");
  });
});
