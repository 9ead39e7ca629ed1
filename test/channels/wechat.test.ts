/**
 * WeChat bridge end to end against the loopback iLink fake: health, sessions and tool policy, dedup and crash
 * recovery, reply shaping and held replies, media in (AES CDN) and out (chat_attach), confirm_ask.
 */
import assert from "node:assert/strict";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { FAILURE_REPLY, TURN_FAILED_REPLY, TURN_TIMEOUT_REPLY } from "../../src/channels/common/bridge.js";
import type { AccountSettings } from "../../src/channels/common/component.js";
import { channelPaths } from "../../src/channels/common/files.js";
import { TRUNCATION_MARKER } from "../../src/channels/common/text.js";
import { WechatComponent } from "../../src/channels/wechat/component.js";
import type { WechatCredentials } from "../../src/channels/wechat/credentials.js";
import { parseLossless } from "../../src/channels/wechat/json.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { InstantClock, tempHome, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function setup(settings: Partial<AccountSettings> = {}, opts: { home?: string; fake?: FakeIlink; driver?: FakeSessionDriver } = {}) {
  const fake = opts.fake ?? (await new FakeIlink().start());
  if (!opts.fake) cleanups.push(() => fake.close());
  let home = opts.home;
  if (!home) {
    const t = await tempHome();
    cleanups.push(t.cleanup);
    home = t.home;
  }
  const credentials: WechatCredentials = {
    bot_token: fake.token,
    bot_id: fake.botId,
    user_id: fake.ownerId,
    base_url: fake.base,
    cdn_url: fake.cdnBase,
    saved_unix_seconds: 0,
  };
  const driver = opts.driver ?? new FakeSessionDriver();
  const clock = new InstantClock();
  const comp = new WechatComponent({
    home,
    account: "default",
    credentials,
    settings: { enabled: true, workspace: home, remoteTools: "none", senders: "anyone", ...settings },
    driver,
    clock,
  });
  await comp.start();
  cleanups.push(() => comp.stop());
  return { fake, home, driver, comp, clock };
}

describe("wechat: lossless ids", () => {
  it("keeps uint64 message ids above 2^53 exact and leaves strings alone", () => {
    const v = parseLossless('{"message_id":7448678501208393001,"t":"12345678901234567890","n":1.5,"m":-9007199254740993}') as Record<string, unknown>;
    assert.equal(v["message_id"], "7448678501208393001");
    assert.equal(v["t"], "12345678901234567890");
    assert.equal(v["n"], 1.5);
    assert.equal(v["m"], "-9007199254740993");
  });
});

describe("wechat: health", () => {
  it("is connected only after a validated getupdates, and records the success time", async () => {
    const { comp, fake } = await setup();
    await comp.health.until((h) => h.state === "connected");
    assert.ok(fake.polls.length >= 1 && fake.polls[0]!.authorized);
    const s = comp.status();
    assert.equal(s.state, "connected");
    assert.equal(s.id, "wechat:default");
    assert.equal(s.bot_id, fake.botId);
    assert.equal(s.user_id, fake.ownerId);
    assert.ok(typeof s.last_success_unix_seconds === "number");
    assert.ok(!JSON.stringify(s).includes(fake.token));
  });

  it("503, non-JSON and msgs-as-object are unhealthy, back off 1 s doubling, then recover", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.pollFailures.push("503", "invalid", "msgs_object");
    const { comp, clock } = await setup({}, { fake });
    await comp.health.until((h) => h.state === "connected");
    assert.deepEqual(clock.sleeps.slice(0, 3), [1000, 2000, 4000]);
    assert.equal(comp.status().error, null);
  });

  it("-14 marks the account as needing a new login and stops polling", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.tokenExpired = true;
    const { comp } = await setup({}, { fake });
    await comp.health.until((h) => h.state === "failed");
    assert.equal(comp.status().error, "the platform rejected the saved login; run `berth channel login wechat` again");
    assert.equal(comp.status().last_success_unix_seconds, null);
    assert.ok(!(comp.status().error ?? "").includes(fake.token));
  });
});

describe("wechat: sessions and policy", () => {
  it("owner with remote_tools=owner gets tools and auto-approve; a stranger gets no_tools", async () => {
    const { fake, driver } = await setup({ remoteTools: "owner" });
    fake.push(fake.text(fake.ownerId, "hello from owner"));
    fake.push(fake.text("stranger@im.wechat", "hello from stranger"));
    await fake.waitSent((s) => s.length >= 2);
    const opts = [...driver.sessions.values()];
    assert.deepEqual(
      opts.map((o) => [o.channel, o.noTools, o.autoApprove]).sort(),
      [["WeChat", false, true], ["WeChat", true, false]].sort(),
    );
    const texts = fake.delivered().map((s) => [s.to, s.text]);
    assert.deepEqual(texts.sort(), [[fake.ownerId, "echo: hello from owner"], ["stranger@im.wechat", "echo: hello from stranger"]].sort());
  });

  it("senders=owner leaves others unanswered but seen", async () => {
    const { fake, driver, comp } = await setup({ senders: "owner" });
    fake.push(fake.text("stranger@im.wechat", "anyone there?"));
    fake.push(fake.text(fake.ownerId, "me"));
    await fake.waitSent((s) => s.length >= 1);
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 1);
    assert.equal(fake.sent.length, 1);
    assert.equal(fake.sent[0]!.to, fake.ownerId);
  });

  it("one session per direct sender across messages", async () => {
    const { fake, driver } = await setup();
    fake.push(fake.text("a@im.wechat", "one"));
    await fake.waitSent((s) => s.length >= 1);
    fake.push(fake.text("a@im.wechat", "two"));
    await fake.waitSent((s) => s.length >= 2);
    assert.equal(driver.sessions.size, 1);
    assert.deepEqual(driver.turns.map((t) => t.sessionId), ["s1", "s1"]);
  });
});

describe("wechat: session limits", () => {
  it("runs at most 4 turns at once across conversations", async () => {
    const { fake, driver } = await setup();
    const gates: Array<() => void> = [];
    driver.respond = (t) => new Promise((r) => gates.push(() => r({ text: `echo: ${t.prompt}` })));
    for (let i = 0; i < 6; i++) fake.push(fake.text(`u${i}@im.wechat`, `m${i}`));
    await driver.waitTurns(4);
    const polls = fake.polls.length;
    await fake.waitPolls(polls + 2); // the loop kept polling, yet no fifth turn started
    assert.equal(driver.turns.length, 4);
    gates.shift()!();
    await driver.waitTurns(5);
    for (const g of gates.splice(0)) g();
    await driver.waitTurns(6);
    for (const g of gates.splice(0)) g();
    await fake.waitSent((s) => s.length >= 6);
  });

  it("claims at most 8 messages per conversation; the 9th gets a busy notice and never runs", async () => {
    const { fake, driver, comp } = await setup();
    const gates: Array<() => void> = [];
    driver.respond = (t) => new Promise((r) => gates.push(() => r({ text: `echo: ${t.prompt}` })));
    for (let i = 1; i <= 9; i++) fake.push(fake.text("busy@im.wechat", `m${i}`));
    await fake.waitSent((s) => s.length >= 1);
    assert.match(fake.sent[0]!.text!, /Still working on your earlier messages/);
    for (let i = 1; i <= 8; i++) {
      await driver.waitTurns(i);
      gates.shift()!();
    }
    await fake.waitSent((s) => s.length >= 9);
    await comp.bridge!.idle();
    assert.deepEqual(driver.turns.map((t) => t.prompt), ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"]);
  });

  it("releases a session idle for 30 minutes and starts a fresh one later", async () => {
    const { fake, driver, clock, comp } = await setup();
    fake.push(fake.text("a@im.wechat", "one"));
    await fake.waitSent((s) => s.length >= 1);
    await comp.bridge!.idle();
    clock.offsetMs = 31 * 60 * 1000;
    fake.push(fake.text("b@im.wechat", "two"));
    await fake.waitSent((s) => s.length >= 2);
    await until(() => driver.closed.length > 0);
    assert.deepEqual(driver.closed, ["s1"]);
    await comp.bridge!.idle();
    fake.push(fake.text("a@im.wechat", "three"));
    await fake.waitSent((s) => s.length >= 3);
    assert.equal(driver.turns[2]!.sessionId, "s3");
  });
});

describe("wechat: at-least-once inbound", () => {
  it("a redelivered message (same uint64 id) is answered once, also after a restart", async () => {
    const { fake, driver, comp, home } = await setup();
    const m = fake.text("a@im.wechat", "once");
    fake.push(m);
    await fake.waitSent((s) => s.length >= 1);
    fake.push({ ...m });
    await fake.waitPolls(fake.polls.length + 2);
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 1);
    await comp.stop();
    const state = JSON.parse(await readFile(channelPaths(home, "wechat", "default").state, "utf8")) as { seen: string[]; cursor: string };
    assert.ok(state.seen.includes(String(m["message_id"])), "the exact uint64 id is stored");
    assert.equal((await stat(channelPaths(home, "wechat", "default").state)).mode & 0o777, 0o600);
    // restart from the start of the log: the same id is redelivered and still not run again
    state.cursor = "";
    await writeFile(channelPaths(home, "wechat", "default").state, JSON.stringify(state));
    const again = await setup({}, { home, fake, driver });
    await fake.waitPolls(fake.polls.length + 2);
    await again.comp.bridge!.idle();
    assert.equal(driver.turns.length, 1);
  });

  it("a crash mid-turn leads to one failure reply and no second turn", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    const driver = new FakeSessionDriver();
    driver.respond = () => new Promise(() => undefined); // the turn never finishes before the "crash"
    const first = await setup({}, { fake, driver });
    fake.push(fake.text("a@im.wechat", "long job"));
    await driver.waitTurns(1);
    await first.comp.stop(); // the claim stays in flight, as after kill -9
    const claims = JSON.parse(await readFile(channelPaths(first.home, "wechat", "default").state, "utf8")) as { in_flight: unknown[] };
    assert.equal(claims.in_flight.length, 1);
    driver.respond = (t) => Promise.resolve({ text: `echo: ${t.prompt}` });
    await setup({}, { home: first.home, fake, driver });
    await fake.waitSent((s) => s.length >= 1);
    await fake.waitPolls(fake.polls.length + 2);
    assert.equal(driver.turns.length, 1);
    assert.equal(fake.sent.length, 1);
    assert.ok(fake.sent[0]!.text!.includes(FAILURE_REPLY));
    assert.match(fake.sent[0]!.text!, /^```\nsystem msg: /);
  });
});

describe("wechat: failures on our side", () => {
  it("a claim that cannot be saved is not kept: the cursor stays, the message is redelivered and answered once", async () => {
    const { fake, driver, comp, home } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const blocker = join(home, "state", "channels", "wechat", "default.json");
    await rm(blocker, { force: true });
    await mkdir(join(blocker, "x"), { recursive: true }); // the state file's path is a non-empty directory: every save fails
    fake.push(fake.text("a@im.wechat", "save me"));
    await comp.health.until((h) => h.state === "backoff");
    assert.equal(driver.turns.length, 0, "no turn without a durable claim");
    assert.ok(!(comp.status().error ?? "").includes(home), "the error names no local path");
    await rm(blocker, { recursive: true, force: true });
    await fake.waitSent((s) => s.length >= 1);
    assert.equal(fake.sent[0]!.text, "echo: save me");
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 1);
  });

  it("a stranger's turn is cancelled at its 5-minute limit with a short notice", async () => {
    const { fake, driver, clock } = await setup();
    driver.respond = () => new Promise(() => undefined);
    fake.push(fake.text("slow@im.wechat", "think forever"));
    await driver.waitTurns(1);
    await until(() => clock.pendingLong > 0);
    assert.ok(clock.sleeps.includes(5 * 60 * 1000));
    clock.fireLong();
    await fake.waitSent((s) => s.length >= 1);
    assert.ok(fake.sent[0]!.text!.includes(TURN_TIMEOUT_REPLY));
  });

  it("a turn whose session host failed gets a failure reply, and the next message gets a fresh session", async () => {
    const { fake, driver } = await setup();
    let first = true;
    driver.respond = (t) => {
      if (first) {
        first = false;
        return Promise.reject(new Error("connection to the session host closed"));
      }
      return Promise.resolve({ text: `echo: ${t.prompt}` });
    };
    fake.push(fake.text("a@im.wechat", "one"));
    await fake.waitSent((s) => s.length >= 1);
    assert.ok(fake.sent[0]!.text!.includes(TURN_FAILED_REPLY));
    fake.push(fake.text("a@im.wechat", "two"));
    await fake.waitSent((s) => s.length >= 2);
    assert.equal(fake.sent[1]!.text, "echo: two");
    assert.deepEqual(driver.turns.map((t) => t.sessionId), ["s1", "s2"]);
    assert.deepEqual(driver.closed, ["s1"]);
  });
});

describe("wechat: replies", () => {
  it("splits a long reply into 16 KiB parts; only the first carries the context token", async () => {
    const { fake, driver } = await setup();
    driver.respond = () => Promise.resolve({ text: "字".repeat(12000) }); // 36,000 bytes
    const m = fake.text("a@im.wechat", "long please");
    fake.push(m);
    await fake.waitSent((s) => s.length >= 3);
    assert.equal(fake.sent.length, 3);
    assert.equal(fake.sent[0]!.contextToken, m["context_token"]);
    assert.equal(fake.sent[1]!.contextToken, null);
    assert.equal(fake.sent.filter((s) => s.dropped).length, 0);
    assert.equal(fake.sent.map((s) => s.text).join(""), "字".repeat(12000));
    for (const s of fake.sent) assert.ok(Buffer.byteLength(s.text!) <= 16 * 1024);
  });

  it("truncates past 64 KiB with a marker", async () => {
    const { fake, driver } = await setup();
    driver.respond = () => Promise.resolve({ text: "x".repeat(64 * 1024 + 1) });
    fake.push(fake.text("a@im.wechat", "huge"));
    await fake.waitSent((s) => s.length >= 4);
    const all = fake.sent.map((s) => s.text).join("");
    assert.equal(Buffer.byteLength(all), 64 * 1024);
    assert.ok(all.endsWith(TRUNCATION_MARKER));
  });

  it("exactly 64 KiB is not truncated", async () => {
    const { fake, driver } = await setup();
    driver.respond = () => Promise.resolve({ text: "y".repeat(64 * 1024) });
    fake.push(fake.text("a@im.wechat", "exact"));
    await fake.waitSent((s) => s.length >= 4);
    assert.equal(fake.sent.map((s) => s.text).join(""), "y".repeat(64 * 1024));
  });

  it("a refused reply is held and carried by the next reply", async () => {
    const { fake, comp } = await setup();
    fake.sendFailures.push({ ret: -2, errmsg: "rate limited" });
    fake.push(fake.text("a@im.wechat", "first"));
    await fake.waitPolls(fake.polls.length + 2);
    await comp.bridge!.idle();
    assert.equal(fake.sent.length, 0);
    fake.push(fake.text("a@im.wechat", "second"));
    await fake.waitSent((s) => s.length >= 1);
    assert.match(fake.sent[0]!.text!, /\[earlier reply\]\necho: first[\s\S]*\[reply to your latest message\]\necho: second/);
  });

  it("retries a 5xx send with the same client id", async () => {
    const { fake } = await setup();
    fake.sendFailures.push({ status: 503 });
    fake.push(fake.text("a@im.wechat", "retry me"));
    await fake.waitSent((s) => s.length >= 1);
    assert.equal(fake.sent[0]!.text, "echo: retry me");
  });
});

describe("wechat: media", () => {
  it("downloads and decrypts an inbound image into the media dir and passes it as an attachment", async () => {
    const { fake, driver, home } = await setup();
    const plain = Buffer.from("\x89PNG fake image bytes ".repeat(50));
    const media = fake.putMedia(plain);
    fake.push(fake.text("a@im.wechat", "what is this?", { item_list: [{ type: 1, text_item: { text: "what is this?" } }, { type: 2, image_item: { media: { encrypt_query_param: media.encrypt_query_param, aes_key: media.aes_key } } }] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.attachments.length, 1);
    const a = t!.attachments[0]!;
    assert.equal(a.kind, "image");
    assert.equal(a.size, plain.length);
    assert.ok(a.path.startsWith(join(home, "state", "media", "wechat", "default")));
    assert.deepEqual(await readFile(a.path), plain);
    assert.equal((await stat(a.path)).mode & 0o777, 0o600);
  });

  it("a stranger's file is not downloaded; the turn gets a note instead", async () => {
    const { fake, driver } = await setup();
    const media = fake.putMedia(Buffer.from("secret doc"));
    fake.push(fake.text("a@im.wechat", "", { item_list: [{ type: 4, file_item: { media, file_name: "x.pdf", len: "10" } }] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.attachments.length, 0);
    assert.match(t!.prompt, /\[file: not accepted from this sender\]/);
  });

  it("chat_attach: the owner's attached file is uploaded encrypted after the text and the outbox copy removed", async () => {
    const { fake, driver, home } = await setup({ remoteTools: "owner" });
    const outbox = join(home, "outbox-file.txt");
    const content = Buffer.from("changed file contents\n".repeat(100));
    driver.respond = async () => {
      await writeFile(outbox, content);
      return { text: "done, file attached", files: [{ path: outbox, name: "result.txt", size: content.length, caption: null }] };
    };
    fake.push(fake.text(fake.ownerId, "change the file and send it"));
    await fake.waitSent((s) => s.length >= 2);
    assert.equal(fake.sent[0]!.text, "done, file attached");
    const fileItem = fake.sent[1]!.item["file_item"] as { media: { encrypt_query_param: string; aes_key: string }; file_name: string };
    assert.equal(fileItem.file_name, "result.txt");
    const key = Buffer.from(Buffer.from(fileItem.media.aes_key, "base64").toString("latin1"), "hex");
    assert.deepEqual(fake.uploaded(fileItem.media.encrypt_query_param, key), content);
    await until(async () => !(await stat(outbox).then(() => true, () => false)));
  });
});

describe("wechat: confirm_ask", () => {
  it("asks the owner; a later 'yes' answers it and starts no turn; earlier or other senders never answer", async () => {
    const { fake, driver, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const early = fake.text(fake.ownerId, "yes", { create_time_ms: Date.now() - 60_000 });
    const asked = comp.bridge!.ask("Publish 0.3.0?", 1800);
    await fake.waitSent((s) => s.length >= 1);
    assert.match(fake.sent[0]!.text!, /Publish 0\.3\.0\?\n\nReply yes or no; no answer in 30 minutes counts as no\./);
    assert.equal(fake.sent[0]!.to, fake.ownerId);
    fake.push(early); // sent before delivery: a normal turn
    fake.push(fake.text("other@im.wechat", "yes", { create_time_ms: Date.now() + 1000 })); // not the owner: a normal turn
    await driver.waitTurns(2);
    fake.push(fake.text(fake.ownerId, "是！", { create_time_ms: Date.now() + 1000 }));
    const r = await asked;
    assert.equal(r.state, "yes");
    assert.equal(driver.turns.length, 2);
    await fake.waitSent((s) => s.some((m) => m.text?.includes("going ahead") ?? false));
  });

  it("stopping the account withdraws an open question and tells the owner", async () => {
    const { fake, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const asked = comp.bridge!.ask("Restart?", 600);
    await until(() => comp.bridge!.questionState()?.state === "pending");
    await comp.stop();
    assert.equal((await asked).state, "withdrawn");
    await fake.waitSent((s) => s.some((m) => m.text?.includes("withdrawn") ?? false));
  });

  it("no answer by the deadline counts as expired and the owner is told", async () => {
    const { fake, comp, clock } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const asked = comp.bridge!.ask("Deploy?", 600);
    await fake.waitSent((s) => s.length >= 1);
    assert.match(fake.sent[0]!.text!, /no answer in 10 minutes/);
    await until(() => clock.pendingLong > 0);
    clock.fireLong();
    assert.equal((await asked).state, "expired");
    await fake.waitSent((s) => s.some((m) => m.text?.includes("counted as no") ?? false));
  });
});
