/**
 * `daemon.control` from careless or hostile clients, against a real `berth daemon`: many clients changing channel
 * accounts at once (no lost update; the saved settings and `daemon.status` agree, also after kill -9 and a restart),
 * a `confirm_ask` question made of controls (refused) or carrying them (neutralised before it reaches the chat),
 * refusals that never echo what the client sent, and a workspace given as a symlink saved as its target.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, realpath, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { saveWechatCredentials } from "../../src/channels/wechat/credentials.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { daemonControl as control, startDaemon, startRig, type Daemon, type Msg, type Rig } from "./client.js";


describe("daemon.control under concurrent and hostile clients", () => {
  let rig: Rig;
  let d: Daemon;
  let ilink: FakeIlink;

  before(async () => {
    rig = await startRig();
    ilink = await new FakeIlink().start();
    d = await startDaemon({ ...rig.env, SCV_HOME: await mkdtemp(join(tmpdir(), "scv-hostile-")) });
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    await ilink.close();
    await rig.fake.close();
  });

  it("concurrent channel_set and channel_logout from several clients lose no update; status and the saved file agree", async () => {
    const clients = await Promise.all([0, 1, 2, 3].map(async () => {
      const c = await d.connect();
      await c.initialize();
      return c;
    }));
    // Each client enables 6 accounts of its own, all requests in flight at once.
    const replies = await Promise.all(
      clients.flatMap((c, i) => [0, 1, 2, 3, 4, 5].map((j) => control(c, { action: "channel_set", channel: "wechat", account: `c${i}a${j}`, enabled: j % 2 === 0 }))),
    );
    for (const r of replies) assert.equal(r.type, "daemon.status", JSON.stringify(r));
    const saved = async (): Promise<Record<string, Msg>> =>
      (JSON.parse(await readFile(join(rig.home, "channels", "settings.json"), "utf8")) as Msg).accounts.wechat as Record<string, Msg>;
    const want = clients.flatMap((_c, i) => [0, 1, 2, 3, 4, 5].map((j) => `c${i}a${j}`)).sort();
    assert.deepEqual(Object.keys(await saved()).sort(), want);
    // Opposite requests for one account at once, and logouts of half the accounts interleaved with sets of others.
    await Promise.all([
      ...clients.map((c, i) => control(c, { action: "channel_set", channel: "wechat", account: "c0a0", enabled: i % 2 === 1 })),
      ...clients.map((c, i) => control(c, { action: "channel_logout", channel: "wechat", account: `c${i}a1` })),
      ...clients.map((c, i) => control(c, { action: "channel_set", channel: "wechat", account: `c${i}a2`, remote_tools: "owner" })),
    ]);
    const after1 = await saved();
    const left = want.filter((a) => !/a1$/.test(a));
    assert.deepEqual(Object.keys(after1).sort(), left);
    for (let i = 0; i < 4; i++) assert.equal(after1[`c${i}a2`]!.remote_tools, "owner");
    const st = await control(clients[0]!, { action: "status" });
    const byId = new Map<string, Msg>((st.status.components as Msg[]).map((x) => [x.account as string, x]));
    assert.deepEqual([...byId.keys()].sort(), left);
    for (const a of left) assert.equal(byId.get(a)!.enabled, after1[a]!.enabled, a);
    for (const c of clients) c.end();
    // kill -9 right after, then restart: the saved settings still parse and the new daemon reports the same accounts.
    d.child.kill("SIGKILL");
    await d.exited;
    d = await startDaemon({ ...rig.env, SCV_HOME: await mkdtemp(join(tmpdir(), "scv-hostile-")) });
    const c = await d.connect();
    await c.initialize();
    const st2 = await control(c, { action: "status" });
    assert.deepEqual((st2.status.components as Msg[]).map((x) => x.account as string).sort(), left);
    for (const a of left) await control(c, { action: "channel_logout", channel: "wechat", account: a });
    c.end();
    await c.closed;
  });

  it("a question of only controls is refused; controls in a question never reach the chat", async () => {
    const c = await d.connect();
    await c.initialize();
    for (const question of ["\u0000\u001b", " \u200b\u202e\t\n", "\u0085\u0007"]) {
      const r = await control(c, { action: "confirm_ask", question });
      assert.deepEqual([r.type, r.code, r.message], ["error", "invalid_request", "`command.question` has no visible text; write the question"]);
    }
    await mkdir(join(rig.home, "channels", "wechat"), { recursive: true, mode: 0o700 });
    const settingsPath = join(rig.home, "channels", "settings.json");
    const s = JSON.parse(await readFile(settingsPath, "utf8")) as Msg;
    await writeFile(settingsPath, JSON.stringify({ ...s, endpoints: { wechat: { api: ilink.base, cdn: ilink.cdnBase } } }), { mode: 0o600 });
    await saveWechatCredentials(join(rig.home, "channels", "wechat", "q.json"), {
      bot_token: ilink.token,
      bot_id: ilink.botId,
      user_id: ilink.ownerId,
      base_url: ilink.base,
      cdn_url: ilink.cdnBase,
      saved_unix_seconds: 0,
    });
    assert.equal((await control(c, { action: "channel_set", channel: "wechat", account: "q", enabled: true })).type, "daemon.status");
    // Wait (polling status) until the account's bridge is connected, so the owner chat is reachable.
    for (;;) {
      const st = await control(c, { action: "status" });
      if ((st.status.components as Msg[]).some((x) => x.account === "q" && x.state === "connected")) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const question = "Ship\u001b[2J it\u0000?\u202e\u0007 ok\r";
    const asked = await control(c, { action: "confirm_ask", question, timeout_seconds: 600 });
    assert.equal(asked.type, "daemon.status", JSON.stringify(asked));
    const sent = await ilink.waitSent((all) => all.some((m) => (m.text ?? "").includes("Ship")));
    const text = sent.find((m) => (m.text ?? "").includes("Ship"))!.text as string;
    assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.test(text), JSON.stringify(text));
    assert.match(text, /Ship<U\+001B>\[2J it<U\+0000>\?<U\+202E><U\+0007> ok/);
    await control(c, { action: "channel_logout", channel: "wechat", account: "q" });
    c.end();
    await c.closed;
  });

  it("refusals are fixed messages that echo nothing the client sent; a symlinked workspace is saved resolved", async () => {
    const c = await d.connect();
    await c.initialize();
    const esc = "\u001b]0;owned\u0007\u001b[2J";
    const cases: Array<[Msg, string, string]> = [
      [{ action: "channel_set", channel: esc, account: "a" }, "component_error", "unknown channel in `command.channel`: use wechat or feishu (lark is feishu)"],
      [{ action: "channel_logout", channel: esc, account: "a" }, "component_error", "unknown channel in `command.channel`: use wechat or feishu (lark is feishu)"],
      ...[esc, "a/b", "..", "a\u0000b", "x".repeat(1000)].map((account): [Msg, string, string] => [
        { action: "channel_set", channel: "wechat", account, enabled: false },
        "component_error",
        "invalid account name in `command.account`: use 1-64 of A-Z a-z 0-9 _ -",
      ]),
      [{ action: "channel_logout", channel: "feishu", account: esc }, "component_error", "invalid account name in `command.account`: use 1-64 of A-Z a-z 0-9 _ -"],
      [{ action: "delegation_kill", handle: esc + "x".repeat(10_240) }, "delegation_error", "no delegated run has the `command.handle` given (list them with the `delegations` action)"],
      // An unknown action (a control sequence, a pasted key, a 64-character name) is named by its field, not echoed.
      ...[esc + "status", `sk-ant-api03-${"k".repeat(40)}`, "a".repeat(64), "\u202econtrol_set"].map((action): [Msg, string, string] => [
        { action },
        "invalid_json",
        "unknown `command.action`: this daemon knows status, reload, channel_set, channel_logout, delegations, delegation_kill, restart_when_idle, confirm_ask, confirm_status; an action added later needs a newer daemon",
      ]),
    ];
    for (const [command, code, message] of cases) {
      const r = await control(c, command);
      assert.deepEqual([r.type, r.code, r.message], ["error", code, message], JSON.stringify(command).slice(0, 80));
    }
    const dir = await mkdtemp(join(tmpdir(), "ws-real-"));
    const link = join(await mkdtemp(join(tmpdir(), "ws-link-")), "link");
    await symlink(dir, link);
    assert.equal((await control(c, { action: "channel_set", channel: "wechat", account: "linked", enabled: false, workspace: link })).type, "daemon.status");
    const saved = JSON.parse(await readFile(join(rig.home, "channels", "settings.json"), "utf8")) as Msg;
    assert.equal(saved.accounts.wechat.linked.workspace, await realpath(dir));
    await control(c, { action: "channel_logout", channel: "wechat", account: "linked" });
    // A huge parent chain or version is refused before it can be kept in every later status (`restart.requester`).
    for (const [command, field, max] of [
      [{ action: "restart_when_idle", parent: "a/b/".repeat(100_000) }, "parent", 1024],
      [{ action: "confirm_ask", question: "ok?", parent: "p".repeat(1025) }, "parent", 1024],
      [{ action: "restart_when_idle", version: "1".repeat(129) }, "version", 128],
    ] as const) {
      const r = await control(c, command);
      assert.deepEqual(
        [r.code, r.message],
        ["invalid_request", `\`command.${field}\` exceeds ${max} bytes; pass the value as given to you (\`SCV_PARENT\`, \`berth build-info\`)`],
      );
    }
    // The daemon still serves this client after every refusal.
    assert.equal((await control(c, { action: "status" })).type, "daemon.status");
    c.end();
    await c.closed;
  });
});
