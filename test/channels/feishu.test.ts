/**
 * Feishu/Lark bridge end to end against the loopback Feishu fake (REST + protobuf long connection): frames,
 * health and catch-up, direct/group/thread sessions, fragments, acks and re-push dedup, media, held replies,
 * confirm_ask.
 */
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import type { AccountSettings } from "../../src/channels/common/component.js";
import { FORWARD_UNREADABLE } from "../../src/channels/common/bridge.js";
import { FeishuComponent } from "../../src/channels/feishu/component.js";
import { FORWARD_MAX_ITEMS, forwardText } from "../../src/channels/feishu/inbound.js";
import type { FeishuCredentials } from "../../src/channels/feishu/credentials.js";
import { decodeFrame, encodeFrame, FrameError } from "../../src/channels/feishu/frame.js";
import { deadAfterMs } from "../../src/channels/feishu/socket.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { InstantClock, ManualTimers, tempHome, until, runCleanups } from "./helpers.js";

const OWNER = "ou_owner000000001";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function setup(settings: Partial<AccountSettings> = {}, opts: { brand?: "feishu" | "lark"; secret?: string; fake?: FakeFeishu; timers?: ManualTimers } = {}) {
  const fake = opts.fake ?? (await new FakeFeishu().start());
  if (!opts.fake) cleanups.push(() => fake.close());
  const { home, cleanup } = await tempHome();
  cleanups.push(cleanup);
  const credentials: FeishuCredentials = {
    brand: opts.brand ?? "feishu",
    app_id: fake.appId,
    app_secret: opts.secret ?? fake.appSecret,
    owner_open_id: OWNER,
    open_url: fake.base,
    saved_unix_seconds: 0,
  };
  const driver = new FakeSessionDriver();
  const clock = new InstantClock();
  const comp = new FeishuComponent({
    home,
    account: "default",
    credentials,
    settings: { enabled: true, workspace: home, remoteTools: "none", senders: "anyone", ...settings },
    driver,
    clock,
    ...(opts.timers !== undefined ? { timers: opts.timers } : {}),
  });
  await comp.start();
  cleanups.push(() => comp.stop());
  return { fake, home, driver, comp, clock };
}

const textOf = (s: { content: Record<string, unknown> }): string => String(s.content["text"]);

describe("feishu: frame codec", () => {
  it("round-trips a frame with headers and payload, including 64-bit ids", () => {
    const f = { seqId: 2n ** 63n + 5n, logId: 7n, service: 7, method: 1, headers: [{ key: "type", value: "event" }, { key: "sum", value: "2" }], payload: Buffer.from("{}"), logIdNew: "x" };
    const back = decodeFrame(encodeFrame(f));
    assert.equal(back.seqId, f.seqId);
    assert.deepEqual(back.headers, f.headers);
    assert.equal(Buffer.from(back.payload!).toString(), "{}");
  });
  it("rejects truncated input", () => {
    const bytes = encodeFrame({ seqId: 1n, logId: 1n, service: 1, method: 1, headers: [{ key: "type", value: "event" }] });
    assert.throws(() => decodeFrame(bytes.subarray(0, bytes.length - 2)), FrameError);
  });
});

describe("feishu: health", () => {
  it("connects, pings, and is connected after catch-up; status carries no secret", async () => {
    const { fake, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    await fake.waitFor(() => fake.pings.length >= 1);
    const s = comp.status();
    assert.equal(s.bot_id, fake.appId);
    assert.equal(s.user_id, OWNER);
    assert.ok(!JSON.stringify(s).includes(fake.appSecret));
  });

  it("pings at the interval the server's pong announces", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    fake.pongPingInterval = 1;
    const { comp } = await setup({}, { fake });
    await comp.health.until((h) => h.state === "connected");
    await fake.waitFor(() => fake.pings.length >= 3); // the endpoint said 120 s; only the pongs' 1 s gets here
    assert.equal(fake.connections, 1);
  });

  it("a wrong app secret fails with the log-in-again error", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    const { comp } = await setup({}, { fake, secret: "wrong" });
    await comp.health.until((h) => h.state === "failed");
    assert.equal(comp.status().error, "the platform rejected the saved login; run `berth channel login feishu` again");
  });

  it("an endpoint auth failure (514) stops in failed with the log-in-again error", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    fake.endpointErrors.push(514);
    const { comp } = await setup({}, { fake });
    await comp.health.until((h) => h.state === "failed");
    assert.match(comp.status().error ?? "", /berth channel login feishu/);
  });

  it("an invalidated tenant token is fetched again and the call retried", async () => {
    const { fake, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const issued = fake.tokensIssued;
    fake.rotateToken();
    fake.userMessage({ chatId: "oc_tok", chatType: "p2p", sender: "ou_tok", text: "after rotation" });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(textOf(fake.sent[0]!), "echo: after rotation");
    assert.equal(fake.tokensIssued, issued + 1);
  });

  it("a retryable endpoint error backs off, then connects", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    fake.endpointErrors.push(1000040343);
    const { comp, clock } = await setup({}, { fake });
    await comp.health.until((h) => h.state === "connected");
    assert.equal(clock.sleeps[0], 1000);
  });
});

describe("feishu: dead link", () => {
  it("a link that stops answering pings is closed at 2 × interval + 30 s (not a millisecond sooner) and reconnected", async () => {
    const timers = new ManualTimers();
    const { fake, comp } = await setup({}, { timers });
    await comp.health.until((h) => h.state === "connected");
    await fake.waitFor(() => fake.pings.length >= 1); // the connect-time ping, answered: the last frame at t = 0
    fake.silent = true;
    timers.advance(120_000); // the next ping goes out and gets no answer
    await fake.waitFor(() => fake.unansweredPings >= 1);
    timers.advance(deadAfterMs(120_000) - 120_000 - 1);
    await fake.waitFor(() => fake.unansweredPings >= 2);
    assert.equal(timers.now, 269_999);
    assert.equal(fake.connections, 1);
    assert.equal(comp.status().state, "connected", "one millisecond before the bound the link still counts as live");
    let seen: string | null = null;
    const down = comp.health.until((h) => {
      if (h.state === "disconnected") seen = h.error;
      return h.state === "disconnected";
    });
    timers.advance(1);
    await down;
    assert.equal(seen, "the long connection stopped answering pings; reconnecting");
    fake.silent = false;
    await fake.waitFor(() => fake.connections === 2);
    await comp.health.until((h) => h.state === "connected");
    await fake.waitFor(() => fake.pings.length >= 2); // the new link pings at once and is answered
  });
});

describe("feishu: conversations", () => {
  it("a direct message gets a reply to that message with a uuid; the ack is 200", async () => {
    const { fake, comp, driver } = await setup({ remoteTools: "owner" });
    await comp.health.until((h) => h.state === "connected");
    const id = fake.userMessage({ chatId: "oc_dm1", chatType: "p2p", sender: OWNER, text: "hi there" });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(fake.sent[0]!.via, "reply");
    assert.equal(fake.sent[0]!.target, id);
    assert.equal(textOf(fake.sent[0]!), "echo: hi there");
    assert.ok(fake.sent[0]!.uuid.length > 0);
    await fake.waitFor(() => fake.acks.length >= 1);
    assert.equal(fake.acks[0]!.code, 200);
    assert.deepEqual([...driver.sessions.values()][0], { cwd: comp["o"].settings.workspace, channel: "Feishu", noTools: false, autoApprove: true });
  });

  it("groups answer only when mentioned, one session per group + sender; a thread gets its own session", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: "ou_a", text: "not for the bot" });
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: "ou_a", text: "question", mentionBot: true });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(textOf(fake.sent[0]!), "echo: question");
    fake.userMessage({ chatId: "oc_g", chatType: "group", sender: "ou_a", text: "in thread", mentionBot: true, threadId: "omt_1" });
    await fake.waitFor(() => fake.sent.length >= 2);
    assert.equal(fake.sent[1]!.inThread, true);
    assert.equal(driver.turns.length, 2);
    assert.notEqual(driver.turns[0]!.sessionId, driver.turns[1]!.sessionId);
    assert.ok([...driver.sessions.values()].every((o) => o.noTools && o.channel === "Feishu"));
    await fake.waitFor(() => fake.acks.length >= 3);
  });

  it("reassembles a fragmented event and answers a re-pushed event once", async () => {
    const { fake, comp, driver } = await setup();
    fake.ackTimeoutMs = 60_000;
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_dm2", chatType: "p2p", sender: "ou_b", text: "split ".repeat(200) }, { parts: 3 });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(textOf(fake.sent[0]!), "echo: " + "split ".repeat(200).trim());
    // the platform re-pushes the same message (at-least-once): same message_id → no second turn
    const ev = { schema: "2.0", header: { event_type: "im.message.receive_v1", event_id: "e2" }, event: { sender: { sender_id: { open_id: "ou_b" }, sender_type: "user" }, message: { message_id: fake.sent[0]!.target, chat_id: "oc_dm2", chat_type: "p2p", message_type: "text", content: '{"text":"x"}', create_time: "1" } } };
    fake.pushEvent(ev);
    await fake.waitFor(() => fake.acks.length >= 2);
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 1);
  });

  it("messages from apps (the bot itself included) and other event types are acked and ignored", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.pushEvent({ schema: "2.0", header: { event_type: "im.message.receive_v1" }, event: { sender: { sender_id: { open_id: fake.botOpenId }, sender_type: "app" }, message: { message_id: "om_app1", chat_id: "oc_x", chat_type: "p2p", message_type: "text", content: '{"text":"from an app"}', create_time: "1" } } });
    fake.pushEvent({ schema: "2.0", header: { event_type: "im.message.message_read_v1" }, event: {} });
    fake.userMessage({ chatId: "oc_x", chatType: "p2p", sender: "ou_u", text: "from a person" });
    await fake.waitFor(() => fake.acks.length >= 3 && fake.sent.length >= 1);
    assert.ok(fake.acks.every((a) => a.code === 200));
    await comp.bridge!.idle();
    assert.deepEqual(driver.turns.map((t) => t.prompt), ["from a person"]);
  });

  it("acks an event once its claim is durable, long before the turn ends", async () => {
    const { fake, comp, driver, home } = await setup();
    let finish!: () => void;
    driver.respond = (t) => new Promise((r) => (finish = () => r({ text: `echo: ${t.prompt}` })));
    await comp.health.until((h) => h.state === "connected");
    const id = fake.userMessage({ chatId: "oc_ack", chatType: "p2p", sender: "ou_k", text: "slow one" });
    await fake.waitFor(() => fake.acks.length >= 1);
    assert.equal(fake.acks[0]!.code, 200);
    assert.equal(fake.sent.length, 0, "acked while the turn is still running");
    const state = JSON.parse(await readFile(join(home, "state", "channels", "feishu", "default.json"), "utf8")) as { in_flight: Array<{ id: string }> };
    assert.deepEqual(state.in_flight.map((c) => c.id), [id], "the claim was on disk when the ack went out");
    await driver.waitTurns(1);
    finish();
    await fake.waitFor(() => fake.sent.length >= 1);
  });

  it("catches up messages sent while disconnected, answering each once", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_dm3", chatType: "p2p", sender: "ou_c", text: "before" });
    await fake.waitFor(() => fake.sent.length >= 1);
    const origConnect = fake.connections;
    let reopen!: () => void;
    fake.endpointGate = new Promise((r) => (reopen = r)); // keep it disconnected until the message is sent
    fake.kick();
    await comp.health.until((h) => h.state !== "connected");
    await fake.waitFor(() => !fake.connected);
    const pushes = fake.pushes;
    fake.userMessage({ chatId: "oc_dm3", chatType: "p2p", sender: "ou_c", text: "while away", createMs: Date.now() + 1 });
    assert.equal(fake.pushes, pushes, "not pushed: nobody was connected");
    fake.endpointGate = null;
    reopen();
    await fake.waitFor(() => fake.sent.length >= 2);
    await comp.health.until((h) => h.state === "connected");
    assert.ok(fake.connections > origConnect);
    assert.equal(textOf(fake.sent[1]!), "echo: while away");
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 2);
  });
});

describe("feishu: thread catch-up", () => {
  it("a thread message sent while disconnected is caught up from the thread and answered in the thread", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_g2", chatType: "group", sender: "ou_t", text: "start", mentionBot: true, threadId: "omt_9" });
    await fake.waitFor(() => fake.sent.length >= 1);
    await comp.bridge!.idle();
    let reopen!: () => void;
    fake.endpointGate = new Promise((r) => (reopen = r));
    fake.kick();
    await comp.health.until((h) => h.state !== "connected");
    await fake.waitFor(() => !fake.connected);
    const pushes = fake.pushes;
    fake.userMessage({ chatId: "oc_g2", chatType: "group", sender: "ou_t", text: "follow-up", mentionBot: true, threadId: "omt_9", createMs: Date.now() + 1 });
    assert.equal(fake.pushes, pushes);
    fake.endpointGate = null;
    reopen();
    await fake.waitFor(() => fake.sent.length >= 2);
    assert.equal(textOf(fake.sent[1]!), "echo: follow-up");
    assert.equal(fake.sent[1]!.inThread, true);
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 2);
    assert.equal(driver.turns[0]!.sessionId, driver.turns[1]!.sessionId, "the thread keeps its session");
  });
});

describe("feishu: thread replies refused", () => {
  it("when the chat does not allow thread replies (230071), the reply goes to the chat instead", async () => {
    const { fake, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.sendFailures.push(230071);
    fake.userMessage({ chatId: "oc_nt", chatType: "group", sender: "ou_n", text: "in a thread", mentionBot: true, threadId: "omt_x" });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(fake.sent[0]!.inThread, false);
    assert.equal(textOf(fake.sent[0]!), "echo: in a thread");
  });
});

describe("feishu: media, held replies, brands, questions", () => {
  it("downloads an image resource and passes it as an attachment", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const bytes = Buffer.from("image-bytes".repeat(100));
    fake.putResource("om_img1", "img_k1", bytes, "image/png");
    fake.userMessage({ chatId: "oc_dm4", chatType: "p2p", sender: "ou_d", msgType: "image", content: { image_key: "img_k1" }, messageId: "om_img1" });
    fake.userMessage({ chatId: "oc_dm4", chatType: "p2p", sender: "ou_d", msgType: "image", content: { image_key: "missing" } });
    const [t1, t2] = await driver.waitTurns(2);
    assert.equal(t1!.attachments.length, 1);
    assert.deepEqual(await readFile(t1!.attachments[0]!.path), bytes);
    assert.equal(t1!.attachments[0]!.mime, "image/png");
    assert.equal(t2!.attachments.length, 0);
    assert.match(t2!.prompt, /\[image: download failed\]/); // the platform's JSON error (status 200) is a failure
  });

  it("chat_attach files go out after the text: an image via /images, a document via /files", async () => {
    const { fake, comp, driver, home } = await setup({ remoteTools: "owner" });
    await comp.health.until((h) => h.state === "connected");
    const png = join(home, "chart.png");
    const pdf = join(home, "report.pdf");
    driver.respond = async () => {
      await writeFile(png, Buffer.from("\x89PNG chart"));
      await writeFile(pdf, Buffer.from("%PDF report"));
      return {
        text: "Here you go.",
        files: [
          { path: png, name: "chart.png", size: 10, caption: null },
          { path: pdf, name: "report.pdf", size: 11, caption: "the weekly report" },
        ],
      };
    };
    fake.userMessage({ chatId: "oc_own", chatType: "p2p", sender: OWNER, text: "send me the files" });
    await fake.waitFor(() => fake.sent.length >= 4);
    assert.deepEqual(fake.sent.map((s) => s.msgType), ["text", "image", "file", "text"]);
    const imageKey = String(fake.sent[1]!.content["image_key"]);
    const fileKey = String(fake.sent[2]!.content["file_key"]);
    assert.equal(fake.uploads.get(imageKey)!.bytes.toString(), "\x89PNG chart");
    assert.equal(fake.uploads.get(fileKey)!.name, "report.pdf");
    assert.equal(textOf(fake.sent[3]!), "the weekly report");
    assert.equal(new Set(fake.sent.map((s) => s.uuid)).size, 4, "every message has its own uuid");
  });

  it("a post's text and embedded image reach the turn; a voice message gets a fixed reply and no turn", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.putResource("om_post1", "img_p", Buffer.from("pic"), "image/jpeg");
    fake.userMessage({
      chatId: "oc_p",
      chatType: "p2p",
      sender: "ou_p",
      msgType: "post",
      messageId: "om_post1",
      content: { zh_cn: { title: "Bug", content: [[{ tag: "text", text: "see " }, { tag: "a", text: "link", href: "https://x" }], [{ tag: "img", image_key: "img_p" }]] } },
    });
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, "Bug\nsee link");
    assert.equal(t!.attachments.length, 1);
    fake.userMessage({ chatId: "oc_p", chatType: "p2p", sender: "ou_p", msgType: "audio", content: { file_key: "f", duration: 3 } });
    await fake.waitFor(() => fake.sent.some((s) => textOf(s).includes("voice")));
    await comp.bridge!.idle();
    assert.equal(driver.turns.length, 1);
  });

  it("a merge_forward reaches the turn as the text of its forwarded messages; an unreadable one says so", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.forwardMessage({ chatId: "oc_fw", chatType: "p2p", sender: "ou_f" }, [
      { sender: "ou_alice", text: "the build is red", createMs: 2 },
      { sender: "ou_bob", msgType: "file", content: { file_key: "file_1", file_name: "log.txt" }, createMs: 3 },
      { sender: "ou_carol", msgType: "post", content: { title: "Plan", content: [[{ tag: "text", text: "fix it today" }]] }, createMs: 1 },
    ]);
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(driver.turns[0]!.prompt, "Forwarded messages:\n[ou_carol] Plan fix it today\n[ou_alice] the build is red\n[ou_bob] [file log.txt]");
    // A bundle the platform no longer returns (not in its history): the turn is told it could not be read.
    fake.pushEvent({ schema: "2.0", header: { event_type: "im.message.receive_v1" }, event: { sender: { sender_id: { open_id: "ou_f" }, sender_type: "user" }, message: { message_id: "om_gone", chat_id: "oc_fw", chat_type: "p2p", message_type: "merge_forward", content: '{"content":"Merged and Forwarded Message"}', create_time: "5" } } });
    await fake.waitFor(() => fake.sent.length >= 2);
    assert.equal(driver.turns[1]!.prompt, FORWARD_UNREADABLE);
  });

  it("forwardText keeps at most 50 forwarded messages and says how many more there were", () => {
    const items = [{ message_id: "om_root" }, ...Array.from({ length: 52 }, (_, i) => ({ message_id: `c${i}`, upper_message_id: "om_root", msg_type: "text", create_time: String(i), sender: { id: "ou_x", sender_type: "user" }, body: { content: JSON.stringify({ text: `m${i}` }) } }))];
    const lines = forwardText(items, "om_root").split("\n");
    assert.equal(lines.length, 1 + FORWARD_MAX_ITEMS + 1);
    assert.equal(lines[FORWARD_MAX_ITEMS], "[ou_x] m49");
    assert.equal(lines.at(-1), "[… 2 more]");
    assert.equal(forwardText(items.slice(0, 51), "om_root").split("\n").length, 1 + FORWARD_MAX_ITEMS, "exactly 50: no 'more' line");
  });

  it("forwardText joins a forwarded message's lines in one linear pass, whatever its whitespace", () => {
    // A sender's message of megabytes of whitespace before a letter: a pattern needing a line break after a run of
    // whitespace rescanned the run from each position (hours at this size, on the daemon's event loop).
    const text = "a \n\t b" + " \t".repeat(1_000_000) + "c";
    const items = [{ message_id: "om_root" }, { message_id: "c0", upper_message_id: "om_root", msg_type: "text", create_time: "1", sender: { id: "ou_x", sender_type: "user" }, body: { content: JSON.stringify({ text }) } }];
    const line = forwardText(items, "om_root").split("\n")[1]!;
    assert.ok(line.startsWith("[ou_x] a b \t \t"), JSON.stringify(line.slice(0, 20)));
  });

  it("a refused reply (final code) is held and carried by the next reply", async () => {
    const { fake, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.sendFailures.push(230002);
    fake.userMessage({ chatId: "oc_dm5", chatType: "p2p", sender: "ou_e", text: "one" });
    await fake.waitFor(() => fake.acks.length >= 1);
    await comp.bridge!.idle();
    assert.equal(fake.sent.length, 0);
    fake.userMessage({ chatId: "oc_dm5", chatType: "p2p", sender: "ou_e", text: "two" });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.match(textOf(fake.sent[0]!), /\[earlier reply\]\necho: one[\s\S]*echo: two/);
  });

  it("a rate-limit code is retried with the same uuid", async () => {
    const { fake, comp } = await setup();
    await comp.health.until((h) => h.state === "connected");
    fake.sendFailures.push(230020);
    fake.userMessage({ chatId: "oc_dm6", chatType: "p2p", sender: "ou_f", text: "retry" });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(textOf(fake.sent[0]!), "echo: retry");
  });

  it("a Lark account names its sessions Lark", async () => {
    const { fake, comp, driver } = await setup({}, { brand: "lark" });
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_dm7", chatType: "p2p", sender: "ou_g", text: "hello" });
    await driver.waitTurns(1);
    assert.equal([...driver.sessions.values()][0]!.channel, "Lark");
  });

  it("model text cannot @-mention", async () => {
    const { fake, comp, driver } = await setup();
    driver.respond = () => Promise.resolve({ text: '<at user_id="all">everyone</at>' });
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_dm8", chatType: "p2p", sender: "ou_h", text: "mention all" });
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.ok(!textOf(fake.sent[0]!).includes("<at"));
  });

  it("confirm_ask: asked unprompted in the owner's chat, answered by the owner's 'yes' with no turn", async () => {
    const { fake, comp, driver } = await setup();
    await comp.health.until((h) => h.state === "connected");
    const asked = comp.bridge!.ask("Publish 0.3.0?", 1800);
    await fake.waitFor(() => fake.sent.length >= 1);
    assert.equal(fake.sent[0]!.via, "create");
    assert.equal(fake.sent[0]!.receiveIdType, "open_id");
    assert.equal(fake.sent[0]!.target, OWNER);
    await until(() => comp.bridge!.questionState()?.state === "pending");
    fake.userMessage({ chatId: "oc_owner", chatType: "p2p", sender: OWNER, text: "Yes.", createMs: Date.now() + 5 });
    assert.equal((await asked).state, "yes");
    await fake.waitFor(() => fake.sent.some((s) => textOf(s).includes("going ahead")));
    assert.equal(driver.turns.length, 0);
  });

  it("stop waits for a question's acknowledgement still being sent: nothing writes the state after it returns", async () => {
    const fake = await new FakeFeishu().start();
    const { comp } = await setup({}, { fake });
    await comp.health.until((h) => h.state === "connected");
    const asked = comp.bridge!.ask("Deploy?", 1800);
    await fake.waitFor(() => fake.sent.length >= 1);
    await until(() => comp.bridge!.questionState()?.state === "pending");
    // The acknowledgement is a reply to the owner's message: held, so it is still being sent when the account stops.
    fake.hold.add("/open-apis/im/v1/messages/");
    fake.userMessage({ chatId: "oc_owner", chatType: "p2p", sender: OWNER, text: "yes", createMs: Date.now() + 5 });
    await fake.waitFor(() => fake.heldRequests >= 1);
    // The bridge's stop (what the account's stop ends with) otherwise involves no I/O: before this fix it had returned
    // by the next check phase of the event loop.
    let returned = false;
    const stopped = comp.bridge!.stop().then(() => (returned = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(returned, false, "stop returned while the acknowledgement was still being sent");
    await fake.close(); // ends the held request: the acknowledgement is refused, and only then may stop return
    await stopped;
    assert.equal((await asked).state, "yes");
  });
});
