/**
 * Feishu end to end in a real `berth daemon`: a saved Feishu account (pointed at the loopback Feishu fake) runs its
 * sessions on the daemon's SCV socket against the fake provider. A group mention gets a tool-free answer (an
 * unmentioned message none), a thread gets its own conversation and a reply in the thread, a message sent while
 * the long connection was down is caught up and answered once, a broken endpoint leaks no secret, socket URL or
 * message text to stderr or status; then `restart_when_idle` from a delegation of the
 * group's session names the Feishu chat as its `origin`.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { saveFeishuCredentials } from "../../src/channels/feishu/credentials.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { childEnv, ScvClient, type Msg } from "../scv/client.js";
import { fakeSettings } from "../turns/helpers.js";
import { until } from "./helpers.js";

const OWNER = "ou_owner000000001";
const textOf = (s: { content: Record<string, unknown> }): string => String(s.content["text"]);

describe("Feishu in berth daemon", () => {
  let provider: FakeProvider;
  let fake: FakeFeishu;
  let home: string;
  let ws: string;
  let daemon: ChildProcess;
  let exited: Promise<number | null>;
  let c: ScvClient;
  let stderr = "";

  async function control(command: Msg): Promise<Msg> {
    return c.reply(c.request({ type: "daemon.control", command }), ["daemon.status"]);
  }
  /** Every provider request's last user text and whether it offered tools. */
  function asked(): Array<{ text: string; tools: boolean }> {
    return provider.requests
      .filter((r) => r.api !== "models")
      .map((r) => {
        const body = r.json as { tools?: unknown[] };
        return { text: r.body, tools: Array.isArray(body.tools) && body.tools.length > 0 };
      });
  }
  /** The SCV session whose history holds `text` (its file is `<session_id>.jsonl`). */
  async function sessionWith(text: string): Promise<string> {
    const dir = join(home, "sessions");
    for (const f of await readdir(dir)) {
      if (!f.endsWith(".jsonl")) continue;
      // The daemon keeps writing here: an entry listed a moment ago can be gone by the time it is read.
      const body = await readFile(join(dir, f), "utf8").catch((e: NodeJS.ErrnoException) => (e.code === "ENOENT" ? "" : Promise.reject(e)));
      if (body.includes(text)) return f.replace(/\.jsonl$/, "");
    }
    throw new Error(`no session holds ${text}`);
  }

  before(async () => {
    provider = await startFakeProvider();
    fake = await new FakeFeishu().start();
    home = await mkdtemp(join(tmpdir(), "berth-fs-daemon-"));
    ws = await mkdtemp(join(tmpdir(), "berth-fs-daemon-ws-"));
    await writeFile(join(home, "settings.json"), JSON.stringify(fakeSettings(provider.baseUrl)));
    await mkdir(join(home, "channels"), { recursive: true, mode: 0o700 });
    await writeFile(
      join(home, "channels", "settings.json"),
      JSON.stringify({
        endpoints: { feishu: { open: fake.base, accounts: fake.base } },
        accounts: { feishu: { default: { enabled: true, workspace: ws, remote_tools: "owner", senders: "anyone" } } },
      }),
    );
    await saveFeishuCredentials(join(home, "channels", "feishu", "default.json"), {
      brand: "feishu",
      app_id: fake.appId,
      app_secret: fake.appSecret,
      owner_open_id: OWNER,
      open_url: fake.base,
      saved_unix_seconds: 0,
    });
    const scvHome = await mkdtemp(join(tmpdir(), "scv-fs-"));
    daemon = spawn(process.execPath, [BERTH_BIN, "daemon", "--supervised"], {
      env: childEnv({ MC_HOME: home, SCV_HOME: scvHome, NO_PROXY: "127.0.0.1" }),
      cwd: ws,
      stdio: ["ignore", "pipe", "pipe"],
    });
    daemon.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
    exited = new Promise((r) => daemon.once("close", (code) => r(code)));
    const ready = await new Promise<Msg>((resolve, reject) => {
      let out = "";
      daemon.stdout!.on("data", (b: Buffer) => {
        out += b.toString();
        const i = out.indexOf("\n");
        if (i >= 0) resolve(JSON.parse(out.slice(0, i)) as Msg);
      });
      void exited.then((code) => reject(new Error(`daemon exited ${code}: ${stderr}`)));
    });
    const sock = connect(ready.scv_socket as string);
    await new Promise<void>((r) => sock.once("connect", () => r()));
    c = new ScvClient(sock, sock, () => stderr);
    await c.initialize();
    await until(async () => (await control({ action: "status" })).status.components[0]?.state === "connected");
  });

  after(async () => {
    c.end();
    if (daemon.exitCode === null) daemon.kill("SIGKILL");
    await exited;
    await fake.close();
    await provider.close();
    await rm(home, { recursive: true, force: true });
    await rm(ws, { recursive: true, force: true });
  });

  it("a group mention gets a tool-free answer; an unmentioned group message gets none", async () => {
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: OWNER, text: "not for the bot" });
    const id = fake.userMessage({ chatId: "oc_g", chatType: "group", sender: OWNER, text: "group question", mentionBot: true });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(fake.sent[0]!.via, "reply");
    assert.equal(fake.sent[0]!.target, id);
    assert.equal(textOf(fake.sent[0]!), "echo: group question");
    const turns = asked();
    assert.equal(turns.length, 1, "the unmentioned message started no turn");
    assert.equal(turns[0]!.tools, false, "no tools in a group, even for the owner");
    assert.ok(!turns[0]!.text.includes("not for the bot"));
  });

  it("a thread gets its own conversation and the reply in the thread", async () => {
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: OWNER, text: "thread question", mentionBot: true, threadId: "omt_1" });
    await fake.waitFor(() => fake.sent.length >= 2);
    assert.equal(fake.sent[1]!.inThread, true);
    assert.equal(textOf(fake.sent[1]!), "echo: thread question");
    const last = asked().at(-1)!;
    assert.ok(!last.text.includes("group question"), "the thread's session does not carry the group conversation");
    assert.notEqual(await sessionWith("thread question"), await sessionWith("group question"));
  });

  it("a message sent to a known chat while the long connection was down is caught up and answered once", async () => {
    const before = asked().length;
    let reopen!: () => void;
    fake.endpointGate = new Promise((r) => (reopen = r));
    fake.kick();
    await fake.waitFor(() => !fake.connected);
    await until(async () => (await control({ action: "status" })).status.components[0]?.state !== "connected");
    const pushes = fake.pushes;
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: "ou_someone", text: "while away", mentionBot: true, createMs: Date.now() + 1 });
    assert.equal(fake.pushes, pushes, "nobody was connected to push it to");
    fake.endpointGate = null;
    reopen();
    await fake.waitFor(() => fake.sent.length >= 3);
    assert.equal(textOf(fake.sent[2]!), "echo: while away");
    await until(async () => (await control({ action: "status" })).status.components[0]?.state === "connected");
    assert.equal(asked().length, before + 1, "caught up once");
    assert.equal(fake.sent.length, 3);
  });

  it("an endpoint answering HTML: status names it, and no secret, socket URL or text leaks", async () => {
    const statuses: string[] = [];
    const status = async (): Promise<Msg> => {
      const st = await control({ action: "status" });
      statuses.push(JSON.stringify(st));
      return st;
    };
    // (A body without end is tested with an injected clock in feishu-robust.test.ts: here each failure costs a real
    // backoff of 1, 2, 4 … s.)
    fake.endpointAnswers.push({ status: 502, body: "<html><body>502 Bad Gateway</body></html>", type: "text/html" });
    const before = fake.connections;
    fake.kick();
    await until(async () => fake.connections > before && (await status()).status.components[0]?.state === "connected");
    assert.equal(fake.endpointAnswers.length, 0, "the broken answer was read");
    const sent = fake.sent.length;
    fake.userMessage({ chatId: "oc_pw", chatType: "p2p", sender: "ou_pw", text: "my password is hunter2" });
    await fake.waitFor(() => fake.sent.length > sent);
    await status();
    for (const leak of [fake.appSecret, "access_key", "device_id", "hunter2"]) {
      assert.ok(!stderr.includes(leak), `stderr holds ${leak}`);
      assert.ok(!statuses.some((st) => st.includes(leak)), `status holds ${leak}`);
    }
  });

  it("restart_when_idle from a delegation of the group's session names the Feishu chat as origin", async () => {
    const session = await sessionWith("group question");
    const pkg = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as Msg;
    const plan = await control({ action: "restart_when_idle", version: pkg.version, parent: `0a1b2c3d/${session}/codex-1a2b3c`, max_wait_seconds: 60 });
    assert.equal(plan.type, "daemon.status", JSON.stringify(plan));
    assert.equal(plan.status.restart.origin, "feishu:default");
    assert.equal(await exited, 75, "nothing to wait for: the daemon restarts");
    assert.ok(!stderr.includes(fake.appSecret), "the app secret never reaches the log");
  });
});
