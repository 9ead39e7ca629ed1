/**
 * Limits at, and one past, each bound: seen IDs (4096), ignored IDs (4096), held replies (4 per conversation), reply cap (64 KiB, in
 * wechat.test), files per message (16), a stranger's image cap (5 MiB); yes/no parsing; voice and quotes.
 */
import assert from "node:assert/strict";
import { mkdir, readdir, utimes, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { NO_TRANSCRIPT_REPLY } from "../../src/channels/common/bridge.js";
import { parseYesNo } from "../../src/channels/common/confirm.js";
import { MEDIA_KEEP_DAYS, OTHER_IMAGE_BYTES, pruneMedia } from "../../src/channels/common/media.js";
import { DeliveryState, IGNORED_LIMIT, SEEN_LIMIT } from "../../src/channels/common/state.js";
import { shapeReply, systemMessage } from "../../src/channels/common/text.js";
import { startWechat, tempHome, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function stateAt(): Promise<{ path: string }> {
  const { home, cleanup } = await tempHome();
  cleanups.push(cleanup);
  return { path: join(home, "state.json") };
}

describe("delivery state bounds", () => {
  it("keeps exactly the newest 4096 seen ids, durably", async () => {
    const { path } = await stateAt();
    const st = await DeliveryState.load(path, "fp");
    for (let i = 0; i < SEEN_LIMIT; i++) st.markSeen(`m${i}`);
    assert.ok(st.has("m0"), "at the limit the oldest is kept");
    st.markSeen(`m${SEEN_LIMIT}`);
    assert.ok(!st.has("m0"), "one past the limit drops the oldest");
    await st.save();
    const again = await DeliveryState.load(path, "fp");
    assert.ok(again.has("m1") && again.has(`m${SEEN_LIMIT}`) && !again.has("m0"));
  });

  it("remembers the newest 4096 ignored ids apart: they never push a handled id out", async () => {
    const { path } = await stateAt();
    const st = await DeliveryState.load(path, "fp");
    st.markSeen("handled");
    for (let i = 0; i < IGNORED_LIMIT; i++) st.markIgnored(`x${i}`);
    assert.ok(st.has("x0"), "at the limit the oldest ignored id is kept");
    st.markIgnored(`x${IGNORED_LIMIT}`);
    assert.ok(!st.has("x0"), "one past the limit drops the oldest ignored id");
    assert.ok(st.has("handled"), "and never a handled one");
    await st.save();
    const again = await DeliveryState.load(path, "fp");
    assert.ok(again.has("handled") && again.has("x1") && again.has(`x${IGNORED_LIMIT}`) && !again.has("x0"));
  });

  it("state written for other credentials is set aside, not reused", async () => {
    const { path } = await stateAt();
    const st = await DeliveryState.load(path, "fp-a");
    st.markSeen("x");
    st.setCursor("c9");
    await st.save();
    const other = await DeliveryState.load(path, "fp-b");
    assert.ok(!other.has("x"));
    assert.equal(other.cursor, "");
  });

  it("holds at most 4 replies per conversation (oldest dropped), each cut to its byte bound", async () => {
    const { path } = await stateAt();
    const st = await DeliveryState.load(path, "fp");
    for (let i = 1; i <= 4; i++) st.hold("c", `r${i}`, 0, 100);
    assert.deepEqual(st.takeHeld("c", 0), ["r1", "r2", "r3", "r4"]);
    for (let i = 1; i <= 5; i++) st.hold("c", `r${i}`, 0, 100);
    assert.deepEqual(st.takeHeld("c", 0), ["r2", "r3", "r4", "r5"]);
    st.hold("c", "字".repeat(10), 0, 8);
    assert.deepEqual(st.takeHeld("c", 0), ["字字"]);
    st.hold("c", "old", 0, 100);
    assert.deepEqual(st.takeHeld("c", 7 * 24 * 3600 * 1000 + 1), [], "older than 7 days is dropped");
  });
});

describe("text and answers", () => {
  it("splits at character boundaries, never inside a surrogate pair", () => {
    const parts = shapeReply("😀".repeat(10), 8);
    assert.deepEqual(parts, ["😀😀", "😀😀", "😀😀", "😀😀", "😀😀"]);
  });
  it("fences system messages longer than any backtick run inside", () => {
    assert.equal(systemMessage("wechat", "a ```` b"), "`````\nsystem msg: a ```` b\n`````");
    assert.equal(systemMessage("feishu", "plain"), "plain");
  });
  it("parses yes/no words only", () => {
    for (const y of ["yes", "Y", " 是 ", "是的！", "确认。", "同意", "YES!"]) assert.equal(parseYesNo(y), "yes", y);
    for (const n of ["no", "n", "否", "不", "不要", "取消", "算了", "Stop."]) assert.equal(parseYesNo(n), "no", n);
    for (const x of ["ok", "好", "可以", "yes please", ""]) assert.equal(parseYesNo(x), null, x);
    // A sender's megabytes of punctuation (an end-anchored pattern rescanned the run from each position: hours).
    assert.equal(parseYesNo("yes" + "!".repeat(2_000_000)), "yes");
    assert.equal(parseYesNo("!".repeat(2_000_000) + "x"), null);
  });
});

const wechat = () => startWechat(cleanups);

describe("media bounds (WeChat)", () => {
  it("a stranger's image at exactly 5 MiB is read; one byte more is refused with a note", async () => {
    const { fake, driver } = await wechat();
    const at = fake.putMedia(Buffer.alloc(OTHER_IMAGE_BYTES, 1));
    const past = fake.putMedia(Buffer.alloc(OTHER_IMAGE_BYTES + 1, 1));
    fake.push(fake.text("s@im.wechat", "", { item_list: [{ type: 2, image_item: { media: at } }, { type: 2, image_item: { media: past } }] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.attachments.length, 1);
    assert.equal(t!.attachments[0]!.size, OTHER_IMAGE_BYTES);
    assert.match(t!.prompt, /\[image: too large\]/);
  });

  it("media is fetched only from WeChat's CDN hosts (a foreign full_url is refused, not fetched)", async () => {
    const { fake, driver } = await wechat();
    let hits = 0;
    const other = createServer((_req, res) => {
      hits++;
      res.end("bytes");
    });
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => other.close(() => r())));
    const port = (other.address() as AddressInfo).port;
    const media = { encrypt_query_param: "p", full_url: `http://127.0.0.1:${port}/internal-service` }; // reachable, but not the CDN
    fake.push(fake.text(fake.ownerId, "look", { item_list: [{ type: 1, text_item: { text: "look" } }, { type: 2, image_item: { media } }] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.attachments.length, 0);
    assert.equal(t!.prompt, "look\n[image: download failed]");
    assert.equal(hits, 0, "the foreign host was never contacted");
  });

  it("reads 16 files of one message; a 17th is noted, not read", async () => {
    const { fake, driver } = await wechat();
    const item = () => ({ type: 2, image_item: { media: fake.putMedia(Buffer.from("img")) } });
    fake.push(fake.text(fake.ownerId, "", { item_list: Array.from({ length: 16 }, item) }));
    const [t16] = await driver.waitTurns(1);
    assert.equal(t16!.attachments.length, 16);
    assert.equal(t16!.prompt, "");
    fake.push(fake.text(fake.ownerId, "", { item_list: Array.from({ length: 17 }, item) }));
    const t17 = (await driver.waitTurns(2))[1]!;
    assert.equal(t17.attachments.length, 16);
    assert.match(t17.prompt, /1 more files not read: at most 16 per message/);
  });

  it("voice: the transcript is the prompt; without one, a fixed reply and no turn", async () => {
    const { fake, driver } = await wechat();
    fake.push(fake.text("v@im.wechat", "", { item_list: [{ type: 3, voice_item: { encode_type: 6, text: "remind me at five" } }] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, "remind me at five");
    fake.push(fake.text("v@im.wechat", "", { item_list: [{ type: 3, voice_item: { encode_type: 6 } }] }));
    await fake.waitSent((s) => s.some((m) => m.text?.includes(NO_TRANSCRIPT_REPLY) ?? false));
    assert.equal(driver.turns.length, 1);
  });

  it("a quoted message is prefixed to the prompt", async () => {
    const { fake, driver } = await wechat();
    fake.push(fake.text("q@im.wechat", "", { item_list: [{ type: 1, text_item: { text: "is this right?" }, ref_msg: { title: "Ann", message_item: { type: 1, text_item: { text: "2+2=5" } } } }] }));
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, "[Quoting: Ann | 2+2=5]\nis this right?");
  });

  it("bot echoes and tool-call items start no turn", async () => {
    const { fake, driver, comp } = await wechat();
    fake.push({ ...fake.text("x@im.wechat", "echo"), message_type: 2 });
    fake.push(fake.text("x@im.wechat", "", { item_list: [{ type: 11 }] }));
    fake.push(fake.text("x@im.wechat", "real"));
    await driver.waitTurns(1);
    await comp.bridge!.idle();
    assert.deepEqual(driver.turns.map((t) => t.prompt), ["real"]);
  });
});

describe("media retention", () => {
  it("a component start removes received media older than 365 days and keeps newer files", async () => {
    const { home, cleanup } = await tempHome();
    cleanups.push(cleanup);
    const dir = join(home, "conv");
    await mkdir(dir, { recursive: true });
    const now = Date.now();
    const day = 24 * 3600 * 1000;
    for (const [name, age] of [["old.jpg", MEDIA_KEEP_DAYS * day + 60_000], ["edge.jpg", MEDIA_KEEP_DAYS * day - 60_000], ["new.jpg", day]] as const) {
      await writeFile(join(dir, name), "x");
      const t = new Date(now - age);
      await utimes(join(dir, name), t, t);
    }
    assert.equal(await pruneMedia(home, now), 1);
    assert.deepEqual((await readdir(dir)).sort(), ["edge.jpg", "new.jpg"]);
  });
});
