/**
 * The WeChat bridge driving the REAL SCV server (a `berth stdio` child per session, fake provider) through Berth's
 * SCV client:
 * an owner with remote tools gets a file changed in the workspace (the write is approved by the bridge's
 * auto-approve) and the final answer only; a stranger's session has no tools; a duplicate delivery is answered once;
 * an inbound image reaches the model's turn as an attachment; a `chat_attach` file is uploaded after the reply.
 */
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { WechatComponent } from "../../src/channels/wechat/component.js";
import { ScvDriver, stdioConnector } from "../../src/client/scv/driver.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { fakeSettings } from "../turns/helpers.js";
import { InstantClock, until } from "./helpers.js";

describe("channels over the real SCV server (berth stdio)", () => {
  let provider: FakeProvider;
  let ilink: FakeIlink;
  let home: string;
  let workspace: string;
  let driver: ScvDriver;
  let comp: WechatComponent;

  before(async () => {
    provider = await startFakeProvider();
    ilink = await new FakeIlink().start();
    home = await mkdtemp(join(tmpdir(), "berth-ch-scv-"));
    workspace = await mkdtemp(join(tmpdir(), "berth-ch-ws-"));
    await writeFile(join(home, "settings.json"), JSON.stringify(fakeSettings(provider.baseUrl)));
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(MC_|BERTH_|SCV_)/.test(k)) env[k] = v;
    driver = new ScvDriver(stdioConnector(BERTH_BIN, { ...env, MC_HOME: home }));
    comp = new WechatComponent({
      home,
      account: "default",
      credentials: { bot_token: ilink.token, bot_id: ilink.botId, user_id: ilink.ownerId, base_url: ilink.base, cdn_url: ilink.cdnBase, saved_unix_seconds: 0 },
      settings: { enabled: true, workspace, remoteTools: "owner", senders: "anyone" },
      driver,
      clock: new InstantClock(),
    });
    await comp.start();
  });

  after(async () => {
    await comp.stop();
    driver.close();
    await ilink.close();
    await provider.close();
    await rm(home, { recursive: true, force: true });
    await rm(workspace, { recursive: true, force: true });
  });

  it("an owner with tools gets a file changed and only the final answer", async () => {
    provider.script([
      { steps: [{ text: "Let me write it." }, { toolCall: { id: "call_w", name: "write", arguments: { path: "notes.txt", content: "changed by chat\n" } } }] },
      { steps: [{ text: "notes.txt now says: changed by chat" }] },
    ]);
    const msg = ilink.text(ilink.ownerId, "please change notes.txt");
    ilink.push(msg);
    await ilink.waitSent((s) => s.length >= 1);
    assert.equal(await readFile(join(workspace, "notes.txt"), "utf8"), "changed by chat\n");
    assert.equal(ilink.sent[0]!.text, "notes.txt now says: changed by chat");
    assert.equal(ilink.sent[0]!.contextToken, msg["context_token"]);
    // the same delivery again: no second turn
    const before = provider.requests.length;
    ilink.push({ ...msg });
    await ilink.waitPolls(ilink.polls.length + 2);
    await comp.bridge!.idle();
    assert.equal(provider.requests.length, before);
    assert.equal(ilink.sent.length, 1);
  });

  it("chat_attach: the model attaches a workspace file; the bridge uploads it after the reply and clears the outbox", async () => {
    const content = Buffer.from("quarterly numbers\n".repeat(50));
    await writeFile(join(workspace, "report.txt"), content);
    provider.script([
      { steps: [{ toolCall: { id: "call_a", name: "chat_attach", arguments: { path: "report.txt" } } }] },
      { steps: [{ text: "Here is the report." }] },
    ]);
    const n = ilink.sent.length;
    ilink.push(ilink.text(ilink.ownerId, "send me report.txt"));
    await ilink.waitSent((s) => s.length >= n + 2);
    const offered = (provider.requests[provider.requests.length - 2]!.json as { tools?: { name?: string; function?: { name?: string } }[] }).tools ?? [];
    assert.ok(JSON.stringify(offered).includes('"chat_attach"'), "a channel session with tools offers chat_attach");
    assert.equal(ilink.sent[n]!.text, "Here is the report.");
    const fileItem = ilink.sent[n + 1]!.item["file_item"] as { media: { encrypt_query_param: string; aes_key: string }; file_name: string };
    assert.equal(fileItem.file_name, "report.txt");
    const key = Buffer.from(Buffer.from(fileItem.media.aes_key, "base64").toString("latin1"), "hex");
    assert.deepEqual(ilink.uploaded(fileItem.media.encrypt_query_param, key), content);
    const outbox = join(home, "state", "media", "outbox");
    await until(async () => (await readdir(outbox).catch(() => [])).length === 0);
  });

  it("a stranger's session runs without tools", async () => {
    ilink.push(ilink.text("stranger@im.wechat", "hello there"));
    await ilink.waitSent((s) => s.some((m) => m.to === "stranger@im.wechat"));
    const reply = ilink.sent.find((m) => m.to === "stranger@im.wechat")!;
    assert.match(reply.text!, /hello there/);
    const req = provider.requests[provider.requests.length - 1]!;
    const body = req.json as { tools?: unknown[] };
    assert.ok(body.tools === undefined || body.tools.length === 0, "no tools offered to the model");
  });

  it("an inbound image is a turn.start attachment the server accepts", async () => {
    const media = ilink.putMedia(Buffer.from("\xff\xd8\xff fake jpeg"));
    ilink.push(ilink.text(ilink.ownerId, "", { item_list: [{ type: 1, text_item: { text: "what is this?" } }, { type: 2, image_item: { media } }] }));
    const n = ilink.sent.length;
    await ilink.waitSent((s) => s.length > n);
    const req = provider.requests[provider.requests.length - 1]!;
    assert.match(req.body, /what is this\?/);
    assert.match(req.body, /image\.jpg/, "the server listed the attachment in the prompt");
  });
});
