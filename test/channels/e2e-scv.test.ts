/**
 * The bridges over the SCV v3 client (`src/client/scv/`) against a loopback SCV server on a Unix socket: the issue's
 * end-to-end scenarios at the wire level — a WeChat owner with tools asks for a file change and gets the answer and
 * the attached file; a stranger gets a tool-free answer; media arrive as `turn.start` attachments; stopping cancels
 * a running turn with `turn.cancel`; a failed turn gets a short failure reply; a Feishu group mention.
 */
import assert from "node:assert/strict";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { TURN_FAILED_REPLY } from "../../src/channels/common/bridge.js";
import type { AccountSettings } from "../../src/channels/common/component.js";
import { FeishuComponent } from "../../src/channels/feishu/component.js";
import { WechatComponent } from "../../src/channels/wechat/component.js";
import { ScvDriver, unixSocketConnector } from "../../src/client/scv/driver.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { FakeScvServer } from "../fakes/fake-scv-server.js";
import { InstantClock, tempHome, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function scv(home: string): Promise<{ server: FakeScvServer; client: ScvDriver }> {
  const server = await new FakeScvServer(join(home, "scv.sock"), join(home, "state", "media", "outbox")).start();
  cleanups.push(() => server.close());
  const client = new ScvDriver(unixSocketConnector(join(home, "scv.sock")));
  cleanups.push(() => Promise.resolve(client.close()));
  return { server, client };
}

async function wechat(settings: Partial<AccountSettings> = {}) {
  const { home, cleanup } = await tempHome();
  cleanups.push(cleanup);
  const fake = await new FakeIlink().start();
  cleanups.push(() => fake.close());
  const { server, client } = await scv(home);
  const comp = new WechatComponent({
    home,
    account: "default",
    credentials: { bot_token: fake.token, bot_id: fake.botId, user_id: fake.ownerId, base_url: fake.base, cdn_url: fake.cdnBase, saved_unix_seconds: 0 },
    settings: { enabled: true, workspace: home, remoteTools: "owner", senders: "anyone", ...settings },
    driver: client,
    clock: new InstantClock(),
  });
  await comp.start();
  cleanups.push(() => comp.stop());
  return { home, fake, server, client, comp };
}

describe("channels over the SCV client", () => {
  it("a WeChat owner with tools asks for a file change and gets the answer and the attached file", async () => {
    const { home, fake, server } = await wechat();
    fake.push(fake.text(fake.ownerId, "please edit notes.txt"));
    await fake.waitSent((s) => s.length >= 2);
    assert.deepEqual(
      { cwd: server.sessions[0]!.start["cwd"], no_tools: server.sessions[0]!.start["no_tools"], channel: server.sessions[0]!.start["channel"], auto_approve: server.sessions[0]!.start["auto_approve"] },
      { cwd: home, no_tools: false, channel: "WeChat", auto_approve: true },
    );
    assert.deepEqual(server.approvals, [{ approved: true }]);
    assert.equal(fake.sent[0]!.text, "Done: notes.txt changed and attached.");
    assert.equal(await readFile(join(home, "notes.txt"), "utf8"), "edited: notes.txt\n");
    const item = fake.sent[1]!.item["file_item"] as { media: { encrypt_query_param: string; aes_key: string }; file_name: string };
    assert.equal(item.file_name, "notes.txt");
    const key = Buffer.from(Buffer.from(item.media.aes_key, "base64").toString("latin1"), "hex");
    assert.equal(fake.uploaded(item.media.encrypt_query_param, key)?.toString(), "edited: notes.txt\n");
    await until(async () => !(await stat(join(home, "state", "media", "outbox", "turn-1-notes.txt")).then(() => true, () => false)));
  });

  it("a stranger gets a tool-free answer and only the final message (no deltas or progress)", async () => {
    const { fake, server } = await wechat();
    fake.push(fake.text("stranger@im.wechat", "please edit notes.txt"));
    await fake.waitSent((s) => s.length >= 1);
    assert.equal(server.sessions[0]!.start["no_tools"], true);
    assert.equal(server.sessions[0]!.start["auto_approve"], false);
    assert.equal(fake.sent.length, 1);
    assert.equal(fake.sent[0]!.text, "echo: please edit notes.txt");
    assert.equal(server.approvals.length, 0);
  });

  it("inbound media reach the server as turn.start attachments", async () => {
    const { fake, server } = await wechat();
    const plain = Buffer.from("jpeg bytes");
    const media = fake.putMedia(plain, "base64raw");
    fake.push(fake.text(fake.ownerId, "", { item_list: [{ type: 2, image_item: { media } }] }));
    await fake.waitSent((s) => s.length >= 1);
    const [a] = server.turns[0]!.attachments as Array<Record<string, unknown>>;
    assert.equal(a!["kind"], "image");
    assert.equal(a!["size"], plain.length);
    assert.equal(a!["mime"], "image/jpeg");
    assert.deepEqual(await readFile(String(a!["path"])), plain);
  });

  it("a failed turn gets a short failure reply", async () => {
    const { fake } = await wechat();
    fake.push(fake.text("a@im.wechat", "fail please"));
    await fake.waitSent((s) => s.length >= 1);
    assert.ok(fake.sent[0]!.text!.includes(TURN_FAILED_REPLY));
  });

  it("stopping the component cancels a running turn on the wire and keeps its claim", async () => {
    const { fake, server, comp, home } = await wechat();
    fake.push(fake.text("a@im.wechat", "hang on"));
    await until(() => server.turns.length === 1);
    await comp.stop();
    assert.deepEqual(server.cancels, ["turn-1"]);
    assert.equal(fake.sent.length, 0);
    assert.equal(comp.status().state, "stopped");
    const state = JSON.parse(await readFile(join(home, "state", "channels", "wechat", "default.json"), "utf8")) as { in_flight: unknown[] };
    assert.equal(state.in_flight.length, 1);
  });

  it("a Feishu group mention runs a no_tools session named Feishu", async () => {
    const { home, cleanup } = await tempHome();
    cleanups.push(cleanup);
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    const { server, client } = await scv(home);
    const comp = new FeishuComponent({
      home,
      account: "default",
      credentials: { brand: "feishu", app_id: fake.appId, app_secret: fake.appSecret, owner_open_id: "ou_owner", open_url: fake.base, saved_unix_seconds: 0 },
      settings: { enabled: true, workspace: home, remoteTools: "owner", senders: "anyone" },
      driver: client,
      clock: new InstantClock(),
    });
    await comp.start();
    cleanups.push(() => comp.stop());
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: "ou_owner", text: "status?", mentionBot: true });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(String(fake.sent[0]!.content["text"]), "echo: status?");
    assert.equal(server.sessions[0]!.start["channel"], "Feishu");
    assert.equal(server.sessions[0]!.start["no_tools"], true, "tools only in the owner's direct chat");
  });
});
