/**
 * Platform-supplied identifiers the delivery state keeps are bounded (docs/channels.md, "Identifier bounds"): a
 * message whose sender, group/chat, thread or message ID, or context token is past its bound starts no turn, is
 * logged once (naming the field, never its value) and leaves nothing of that identifier in the state file; one at the
 * bound is answered. A WeChat cursor past its bound is polled with but never saved.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { afterEach, describe, it } from "node:test";
import { channelPaths } from "../../src/channels/common/files.js";
import { MAX_CURSOR_BYTES, MAX_HANDLE_BYTES, MAX_ID_BYTES } from "../../src/channels/common/ids.js";
import { startFeishu, startWechat, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

/** A string of exactly `bytes` UTF-8 bytes, mostly two-byte characters (bounds are in bytes, not characters). */
function ofBytes(prefix: string, bytes: number): string {
  const body = bytes - prefix.length;
  return prefix + "é".repeat(Math.floor(body / 2)) + "a".repeat(body % 2);
}

const stateOf = async (home: string, channel: "wechat" | "feishu"): Promise<string> => readFile(channelPaths(home, channel, "default").state, "utf8");

describe("WeChat identifiers at their bound and one past", () => {
  for (const field of ["from_user_id", "context_token", "message_id", "group_id"] as const) {
    const bound = field === "context_token" ? MAX_HANDLE_BYTES : MAX_ID_BYTES;
    it(`${field}: ${bound} bytes is handled; ${bound + 1} starts nothing, is logged once and never saved`, async () => {
      const logs: string[] = [];
      const { fake, driver, home } = await startWechat(cleanups, { log: (l) => logs.push(l), settings: { senders: "anyone" } });
      const atBound = ofBytes("ok-", bound);
      const past = ofBytes("no-", bound + 1);
      const msg = (v: string, text: string): Record<string, unknown> => {
        const m = fake.text("a@im.wechat", text);
        return { ...m, [field]: v, ...(field === "group_id" ? { from_user_id: "a@im.wechat" } : {}) };
      };
      fake.push(msg(atBound, "at the bound"));
      const over = msg(past, "past the bound");
      fake.push(over);
      fake.push(over); // a redelivery: still logged once
      fake.push(fake.text("a@im.wechat", "sentinel"));
      await until(() => driver.turns.some((t) => t.prompt === "sentinel"));
      const prompts = driver.turns.map((t) => t.prompt);
      // WeChat never answers group messages: a group at the bound is read and ignored, without a log line.
      assert.deepEqual(prompts, field === "group_id" ? ["sentinel"] : ["at the bound", "sentinel"]);
      const name = { from_user_id: "sender ID", context_token: "reply token", message_id: "message ID", group_id: "group or chat ID" }[field];
      const lines = logs.filter((l) => l.includes("not delivered"));
      assert.deepEqual(lines, [`wechat: a message was not delivered: its ${name} is over ${bound} bytes`]);
      assert.ok(!logs.join("\n").includes(past) && !logs.join("\n").includes("past the bound"), "neither the value nor the text is logged");
      await until(async () => !(await stateOf(home, "wechat")).includes('"in_flight":[{'));
      const state = await stateOf(home, "wechat");
      assert.ok(!state.includes(past), "the over-long identifier is not in the state file");
      if (field === "message_id") assert.ok(state.includes(JSON.stringify(atBound)), "an ID at the bound is kept as it is");
    });
  }

  it(`a cursor of ${MAX_CURSOR_BYTES} bytes is saved; one byte more is polled with but not saved, logged once`, async () => {
    const logs: string[] = [];
    const { fake, driver, home } = await startWechat(cleanups, { log: (l) => logs.push(l) });
    fake.cursorBytes = MAX_CURSOR_BYTES;
    fake.push(fake.text("a@im.wechat", "one"));
    await until(() => driver.turns.length === 1);
    await until(async () => JSON.parse(await stateOf(home, "wechat")).cursor.length === MAX_CURSOR_BYTES);
    fake.cursorBytes = MAX_CURSOR_BYTES + 1;
    fake.push(fake.text("a@im.wechat", "two"));
    fake.push(fake.text("a@im.wechat", "three")); // a second over-long cursor: no second log line
    await until(() => driver.turns.length === 3);
    const polled = fake.polls.length;
    await until(() => fake.polls.length > polled + 1);
    assert.ok(fake.polls.slice(polled).every((p) => p.cursor.length === MAX_CURSOR_BYTES + 1), "the next polls go on from the new cursor");
    assert.equal(JSON.parse(await stateOf(home, "wechat")).cursor.length, MAX_CURSOR_BYTES, "the saved cursor is the last one within the bound");
    assert.deepEqual(logs.filter((l) => l.includes("cursor")), [
      `wechat: the server's poll cursor is over ${MAX_CURSOR_BYTES} bytes; it is used but not saved (a restart resumes from the last saved one)`,
    ]);
  });
});

describe("Feishu identifiers at their bound and one past", () => {
  for (const field of ["sender", "chatId", "messageId", "threadId"] as const) {
    it(`${field}: ${MAX_ID_BYTES} bytes is handled; ${MAX_ID_BYTES + 1} starts nothing, is logged once and never saved`, async () => {
      const logs: string[] = [];
      const { fake, driver, home } = await startFeishu(cleanups, { log: (l) => logs.push(l) });
      const atBound = ofBytes("ok_", MAX_ID_BYTES);
      const past = ofBytes("no_", MAX_ID_BYTES + 1);
      const send = (v: string, text: string): string =>
        fake.userMessage({
          chatId: "oc_chat0001",
          chatType: field === "threadId" ? "group" : "p2p",
          sender: "ou_user0001",
          text,
          ...(field === "threadId" ? { mentionBot: true } : {}),
          [field]: v,
        });
      send(atBound, "at the bound");
      const overId = send(past, "past the bound");
      fake.userMessage({ chatId: field === "chatId" ? past : "oc_chat0001", chatType: "p2p", sender: field === "sender" ? past : "ou_user0001", text: "past the bound", messageId: overId, ...(field === "threadId" ? { threadId: past, chatType: "group", mentionBot: true } : {}) }); // a re-push
      fake.userMessage({ chatId: "oc_chat0002", chatType: "p2p", sender: "ou_user0002", text: "sentinel" });
      await until(() => driver.turns.some((t) => t.prompt === "sentinel"));
      assert.deepEqual(driver.turns.map((t) => t.prompt).sort(), ["at the bound", "sentinel"]);
      const name = { sender: "sender ID", chatId: "chat ID", messageId: "message ID", threadId: "thread ID" }[field];
      assert.deepEqual(logs.filter((l) => l.includes("not delivered")), [`feishu: a message was not delivered: its ${name} is over ${MAX_ID_BYTES} bytes`]);
      assert.ok(!logs.join("\n").includes(past));
      await until(async () => !(await stateOf(home, "feishu")).includes('"in_flight":[{'));
      const state = await stateOf(home, "feishu");
      assert.ok(!state.includes(past), "neither a seen ID nor a catch-up checkpoint keeps the over-long identifier");
      if (field !== "sender") assert.ok(state.includes(atBound), "the one at the bound is kept (an ID, or a checkpoint key)");
    });
  }
});
