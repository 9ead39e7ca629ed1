/**
 * What a platform (or whoever controls what it delivers) can send that a normal chat never does: oversized text,
 * oversized forwarded bundles, hostile mention keys. Asserted on what the session host receives and what the fake
 * platform gets back.
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { PROMPT_TRUNCATED } from "../../src/channels/common/bridge.js";
import { utf8Length } from "../../src/core/utf8.js";
import { MAX_PROMPT_BYTES } from "../../src/protocols/scv/wire.js";
import { startFeishu, startWechat, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

const wechat = () => startWechat(cleanups);

const feishu = () => startFeishu(cleanups);

describe("oversized prompts", () => {
  it("a WeChat text over the session host's prompt limit is cut with a note, not sent to fail every retry", async () => {
    const { fake, driver } = await wechat();
    const huge = "长".repeat(100_000) + "😀".repeat(10_000); // 340,000 bytes; the cut lands among 4-byte emoji
    fake.push(fake.text("big@im.wechat", huge));
    const [t] = await driver.waitTurns(1);
    assert.ok(utf8Length(t!.prompt) <= MAX_PROMPT_BYTES, `prompt is ${utf8Length(t!.prompt)} bytes`);
    assert.ok(t!.prompt.endsWith(PROMPT_TRUNCATED));
    const kept = t!.prompt.slice(0, -PROMPT_TRUNCATED.length);
    assert.ok(huge.startsWith(kept), "a prefix of the message, cut at a character boundary");
    assert.ok(!/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(kept), "no emoji split in half");
    await fake.waitSent((s) => s.length >= 1);
  });

  it("a message at exactly the limit is passed whole", async () => {
    const { fake, driver } = await wechat();
    const exact = "x".repeat(MAX_PROMPT_BYTES);
    fake.push(fake.text("edge@im.wechat", exact));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, exact);
  });

  it("a Feishu forwarded bundle of 50 long CJK messages fits the prompt limit", async () => {
    const { fake, driver } = await feishu();
    const children = Array.from({ length: 50 }, (_, i) => ({ sender: `ou_f${i}`, text: "转".repeat(2000) })); // ≈300 KB rendered
    fake.forwardMessage({ chatId: "oc_fw", chatType: "p2p", sender: "ou_fw" }, children);
    const [t] = await driver.waitTurns(1);
    assert.ok(utf8Length(t!.prompt) <= MAX_PROMPT_BYTES, `prompt is ${utf8Length(t!.prompt)} bytes`);
    assert.ok(t!.prompt.startsWith("Forwarded messages:\n[ou_f0] 转"));
    assert.ok(t!.prompt.endsWith(PROMPT_TRUNCATED));
  });
});

describe("hostile mention keys (Feishu)", () => {
  it("@_user_1 does not eat @_user_10, and an empty mention key leaves the text alone", async () => {
    const { fake, driver } = await feishu();
    const mentions = [
      { key: "@_user_1", id: { open_id: fake.botOpenId }, name: "Bot" },
      ...Array.from({ length: 10 }, (_, i) => ({ key: `@_user_${i + 2}`, id: { open_id: `ou_m${i + 2}` }, name: `U${i + 2}` })),
      { key: "", id: { open_id: "ou_empty" }, name: "Empty" },
    ];
    fake.pushEvent({
      schema: "2.0",
      header: { event_id: "ev_m", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: "", app_id: fake.appId, tenant_key: "t" },
      event: {
        sender: { sender_id: { open_id: "ou_asker" }, sender_type: "user", tenant_key: "t" },
        message: { message_id: "om_mentions", create_time: String(Date.now()), chat_id: "oc_many", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "@_user_1 ask @_user_10 and @_user_11" }), mentions },
      },
    });
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, "ask @U10 and @U11");
  });
});

describe("a reply refused halfway (WeChat)", () => {
  it("holds only the parts the chat did not get, so the next reply repeats nothing", async () => {
    const { fake, driver, comp } = await wechat();
    driver.respond = (t) => Promise.resolve({ text: t.prompt === "long" ? "甲".repeat(5461) + "乙".repeat(2000) : `echo: ${t.prompt}` }); // 16,383 + 6,000 bytes: two parts
    fake.sendFailures.push(null, { ret: -2, errmsg: "rate limited" }); // part 0 goes out, part 1 is refused
    fake.push(fake.text("half@im.wechat", "long"));
    await fake.waitSent((s) => s.length >= 1);
    await comp.bridge!.idle();
    fake.push(fake.text("half@im.wechat", "next"));
    await fake.waitSent((s) => s.length >= 2);
    const seen = fake.delivered().map((s) => s.text ?? "").join("");
    assert.equal(seen.split("甲").length - 1, 5461, "the first part was shown once");
    assert.equal(seen.split("乙").length - 1, 2000, "the refused part came with the next reply");
    assert.match(fake.delivered()[1]!.text!, /^\[earlier reply\]\n乙+\n\n\[reply to your latest message\]\necho: next$/);
  });
});
