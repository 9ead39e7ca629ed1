/**
 * The channel supervisor (what `berth daemon` will host): saved accounts start as components, `channel_set` and
 * `channel_logout` reconcile, status is the `daemon.status` component list, `confirm_ask` routes to a connected
 * account that knows its owner.
 */
import assert from "node:assert/strict";
import { mkdir, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { afterEach, describe, it } from "node:test";
import { channelPaths } from "../../src/channels/common/files.js";
import { logoutAccount, setAccount } from "../../src/channels/config.js";
import { saveFeishuCredentials } from "../../src/channels/feishu/credentials.js";
import { ChannelSupervisor, offlineStatus } from "../../src/channels/supervisor.js";
import { loadWechatCredentials, saveWechatCredentials } from "../../src/channels/wechat/credentials.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { InstantClock, tempHome, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

describe("channel supervisor", () => {
  it("starts saved accounts, reconciles channel_set/logout, and reports components", async () => {
    const { home, cleanup } = await tempHome();
    cleanups.push(cleanup);
    const ilink = await new FakeIlink().start();
    cleanups.push(() => ilink.close());
    const feishu = await new FakeFeishu().start();
    cleanups.push(() => feishu.close());
    await saveWechatCredentials(channelPaths(home, "wechat", "default").credentials, { bot_token: ilink.token, bot_id: ilink.botId, user_id: ilink.ownerId, base_url: ilink.base, cdn_url: ilink.cdnBase, saved_unix_seconds: 0 });
    await saveFeishuCredentials(channelPaths(home, "feishu", "team").credentials, { brand: "lark", app_id: feishu.appId, app_secret: feishu.appSecret, owner_open_id: "", open_url: feishu.base, saved_unix_seconds: 0 });
    await setAccount(home, "wechat", "default", { remote_tools: "owner" });
    await setAccount(home, "feishu", "team", { remote_tools: "owner", senders: "anyone" });
    await setAccount(home, "wechat", "nologin", {});
    const sup = new ChannelSupervisor({ home, workspace: home, driver: new FakeSessionDriver(), clock: new InstantClock() });
    cleanups.push(() => sup.stop());
    await sup.reconcile();
    await until(() => sup.status().filter((c) => c.state === "connected").length === 2);
    const st = sup.status();
    assert.deepEqual(st.map((c) => c.id), ["feishu:team", "wechat:default", "wechat:nologin"]);
    assert.equal(st[0]!.remote_tools, "none", "owner unknown: remote tools are not effective");
    assert.equal(st[0]!.senders, "anyone");
    assert.equal(st[0]!.error, null);
    assert.equal(st[1]!.remote_tools, "owner");
    assert.equal(st[1]!.senders, "owner");
    assert.equal(st[2]!.state, "failed");
    assert.match(st[2]!.error ?? "", /berth channel login wechat/);
    const text = JSON.stringify(st);
    for (const secret of [ilink.token, feishu.appSecret]) assert.ok(!text.includes(secret));

    const ask = sup.ask("Go?", 600);
    await ilink.waitSent((s) => s.length >= 1);
    assert.equal(ilink.sent[0]!.to, ilink.ownerId, "routed to the connected account that knows its owner");
    await until(() => sup.component("wechat:default")?.bridge?.questionState()?.state === "pending");
    ilink.push(ilink.text(ilink.ownerId, "no", { create_time_ms: Date.now() + 5 }));
    assert.deepEqual((await ask).state, "no");

    await setAccount(home, "wechat", "default", { enabled: false });
    await sup.reconcile();
    assert.equal(sup.status().find((c) => c.id === "wechat:default")!.state, "disabled");
    assert.equal(sup.component("wechat:default"), null);

    await setAccount(home, "feishu", "team", { senders: "owner" });
    await sup.reconcile();
    await until(() => sup.status()[0]!.state === "connected");
    assert.equal(sup.status()[0]!.restarts, 1, "a settings change replaces the component");
    assert.match(sup.status()[0]!.error ?? "", /answers nobody/);
    await logoutAccount(home, "feishu", "team");
    await sup.reconcile();
    assert.deepEqual(sup.status().map((c) => c.id), ["wechat:default", "wechat:nologin"]);
    await assert.rejects(stat(channelPaths(home, "feishu", "team").credentials));
    assert.deepEqual((await offlineStatus(home)).map((c) => [c.id, c.state]), [["wechat:default", "disabled"], ["wechat:nologin", "failed"]]);
  });

  it("a corrupt credentials file fails only its account, and its content reaches no log, error or status", async () => {
    const { home, cleanup } = await tempHome();
    cleanups.push(cleanup);
    const ilink = await new FakeIlink().start();
    cleanups.push(() => ilink.close());
    await saveWechatCredentials(channelPaths(home, "wechat", "good").credentials, { bot_token: ilink.token, bot_id: ilink.botId, user_id: ilink.ownerId, base_url: ilink.base, cdn_url: ilink.cdnBase, saved_unix_seconds: 0 });
    const broken = channelPaths(home, "wechat", "broken").credentials;
    await mkdir(dirname(broken), { recursive: true });
    // A hand edit gone wrong: JSON.parse's own message would quote the text around the fault, i.e. the token.
    await writeFile(broken, '{"bot_id":"b","bot_token":tok-leaky-secret-0123456789}', { mode: 0o600 });
    await setAccount(home, "wechat", "broken", {});
    await setAccount(home, "wechat", "good", {});
    const logs: string[] = [];
    const sup = new ChannelSupervisor({ home, workspace: home, driver: new FakeSessionDriver(), clock: new InstantClock(), log: (l) => logs.push(l) });
    cleanups.push(() => sup.stop());
    await sup.reconcile(); // before: rejected with the parser's message, and no account started
    await until(() => sup.status().find((c) => c.id === "wechat:good")?.state === "connected");
    const bad = sup.status().find((c) => c.id === "wechat:broken")!;
    assert.equal(bad.state, "failed");
    assert.match(bad.error ?? "", /saved login cannot be read: run `berth channel login wechat --account broken` again/);
    const offline = await offlineStatus(home);
    assert.equal(offline.find((c) => c.id === "wechat:broken")!.state, "failed");
    const seen = JSON.stringify([sup.status(), offline, logs]);
    assert.ok(!seen.includes("leaky"), seen);
    await assert.rejects(loadWechatCredentials(broken), { message: `${broken} is not valid JSON` });
  });
});
