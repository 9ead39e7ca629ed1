/**
 * A platform answer that redirects elsewhere (a hostile or misconfigured server, a captive portal): Node's fetch
 * follows a 307 with the same body, dropping only the Authorization header, so the Feishu App Secret, WeChat message
 * text and the poll cursor would reach whatever host the redirect names. The bridges never follow one: the other
 * address (a loopback sink on another origin here) receives nothing, and the failure names the HTTP status.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, it } from "node:test";
import { FeishuComponent } from "../../src/channels/feishu/component.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { InstantClock, startWechat, tempHome, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

/** Another origin (127.0.0.2) that records every request it gets and answers a plausible 200. */
async function sink(): Promise<{ url: string; got: Array<{ path: string; body: string }> }> {
  const got: Array<{ path: string; body: string }> = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      got.push({ path: req.url ?? "", body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ code: 0, tenant_access_token: "t-stolen", expire: 7200, msgs: [], get_updates_buf: "x" }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.2", r));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.2:${(server.address() as AddressInfo).port}/elsewhere`, got };
}

describe("a redirect from the platform is never followed", () => {
  it("Feishu: the App Secret is not re-sent to the address a tenant-token redirect names", async () => {
    const away = await sink();
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    fake.redirects.set("/open-apis/auth/v3/tenant_access_token/internal", away.url);
    const { home, cleanup } = await tempHome();
    cleanups.push(cleanup);
    const comp = new FeishuComponent({
      home,
      account: "default",
      credentials: { brand: "feishu", app_id: fake.appId, app_secret: fake.appSecret, owner_open_id: "ou_owner000000001", open_url: fake.base, saved_unix_seconds: 0 },
      settings: { enabled: true, workspace: home, remoteTools: "none", senders: "anyone" },
      driver: new FakeSessionDriver(),
      clock: new InstantClock(),
    });
    await comp.start();
    cleanups.push(() => comp.stop());
    await comp.health.until((h) => h.state === "backoff");
    assert.equal(comp.status().error, "tenant token: HTTP 307, the answer is not a JSON object");
    assert.deepEqual(away.got, [], "nothing reached the other address");
    // The server stops redirecting: the account connects.
    fake.redirects.clear();
    await comp.health.until((h) => h.state === "connected");
    assert.deepEqual(away.got, []);
  });

  it("WeChat: a reply redirected elsewhere is not sent there; it is held and comes with the next reply", async () => {
    const away = await sink();
    const { fake } = await startWechat(cleanups);
    fake.redirects.set("/ilink/bot/sendmessage", away.url);
    fake.push(fake.text("a@im.wechat", "secret plans"));
    await fake.waitFor(() => fake.redirected >= 1);
    fake.redirects.clear();
    fake.push(fake.text("a@im.wechat", "again"));
    await fake.waitSent((s) => s.some((m) => m.text?.includes("echo: again") ?? false));
    assert.deepEqual(away.got, [], "the message text went nowhere else");
    assert.ok(fake.delivered().some((m) => m.text?.includes("echo: secret plans") ?? false), "the held reply came with the next one");
  });

  it("WeChat: a poll redirected elsewhere takes the cursor nowhere; the account backs off naming the status", async () => {
    const away = await sink();
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.redirects.set("/ilink/bot/getupdates", away.url);
    const { comp } = await startWechat(cleanups, { fake });
    await comp.health.until((h) => h.state === "backoff");
    assert.equal(comp.status().error, "getupdates: HTTP 307");
    assert.deepEqual(away.got, []);
    fake.redirects.clear();
    await comp.health.until((h) => h.state === "connected");
  });

  it("WeChat: a media download is followed only to an allowed media host, never to another address", async () => {
    const away = await sink();
    const { fake, driver } = await startWechat(cleanups);
    const plain = Buffer.from("png bytes");
    const media = fake.putMedia(plain);
    const image = { type: 2, image_item: { media: { encrypt_query_param: media.encrypt_query_param, aes_key: media.aes_key } } };
    fake.redirects.set("/c2c/download", away.url);
    fake.push(fake.text("a@im.wechat", "look", { item_list: [{ type: 1, text_item: { text: "look" } }, image] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, "look\n[image: download failed]");
    assert.deepEqual(away.got, [], "the download did not go to the other address");
  });
});
