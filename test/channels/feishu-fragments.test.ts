/**
 * Fragmented events on the Feishu long connection from a server that misbehaves: fragments sent again under the same
 * `seq`, events that never finish, many events half-assembled at once. Each bound is tested at, and one past, its
 * value; what counts is which events the session host is asked to answer. (An event not assembled is not acked, so
 * the live platform pushes it again; these raw fragments are never re-sent.)
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { MAX_FRAME_BYTES, OVERSIZED_FRAME } from "../../src/channels/feishu/socket.js";
import { ManualTimers, startFeishu, until, runCleanups } from "./helpers.js";

const MiB = 1024 * 1024;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function setup(timers?: ManualTimers) {
  const { fake, driver, comp } = await startFeishu(cleanups, timers !== undefined ? { timers } : {});
  let markers = 0;
  /** A one-frame event after everything sent so far; resolves once its turn ran (earlier frames were all read). */
  const settle = async (): Promise<void> => {
    const tag = `marker${++markers}`;
    fake.userMessage({ chatId: `oc_${tag}`, chatType: "p2p", sender: `ou_${tag}`, text: tag });
    await until(() => driver.turns.some((t) => t.prompt === tag));
    await comp.bridge!.idle();
  };
  /** The tags (first word of each prompt) of the events that became turns, markers left out. */
  const answered = (): string[] => driver.turns.map((t) => t.prompt.split(" ")[0]!).filter((p) => !p.startsWith("marker")).sort();
  return { fake, driver, comp, settle, answered };
}

/** A user's text event; `bytes` pads the text so the JSON payload is exactly that long. */
function event(tag: string, bytes?: number): Buffer {
  const make = (text: string): Buffer =>
    Buffer.from(
      JSON.stringify({
        schema: "2.0",
        header: { event_id: `ev_${tag}`, event_type: "im.message.receive_v1", create_time: String(Date.now()), token: "", app_id: "a", tenant_key: "t" },
        event: {
          sender: { sender_id: { open_id: `ou_${tag}` }, sender_type: "user", tenant_key: "t" },
          message: { message_id: `om_${tag}`, create_time: String(Date.now()), chat_id: `oc_${tag}`, chat_type: "p2p", message_type: "text", content: JSON.stringify({ text }) },
        },
      }),
    );
  const bare = make(`${tag} `);
  return bytes === undefined ? bare : make(`${tag} ` + "a".repeat(bytes - bare.length));
}

describe("feishu fragments: a fragment sent again", () => {
  it("replaces the first copy and counts its own size: an 8 MiB event is assembled, one byte more is not", async () => {
    const { fake, settle, answered } = await setup();
    const send = (tag: string, ev: Buffer, twice: boolean): void => {
      const half = Math.floor(ev.length / 2);
      fake.sendFragment(`fm_${tag}`, 2, 0, Buffer.from("{")); // a tiny first copy of fragment 0 ...
      fake.sendFragment(`fm_${tag}`, 2, 0, ev.subarray(0, half)); // ... replaced by the real one
      if (twice) fake.sendFragment(`fm_${tag}`, 2, 0, ev.subarray(0, half)); // the same again: replaces, adds nothing
      fake.sendFragment(`fm_${tag}`, 2, 1, ev.subarray(half));
    };
    send("at", event("at", 8 * MiB), true);
    send("past", event("past", 8 * MiB + 1), false);
    await settle();
    assert.deepEqual(answered(), ["at"]);
  });
});

describe("feishu fragments: events half-assembled at once", () => {
  const openThenFinish = async (n: number): Promise<string[]> => {
    const { fake, settle, answered } = await setup();
    const evs = Array.from({ length: n }, (_, i) => event(`e${String(i).padStart(2, "0")}`));
    evs.forEach((ev, i) => fake.sendFragment(`fm_${i}`, 2, 0, ev.subarray(0, 10)));
    evs.forEach((ev, i) => fake.sendFragment(`fm_${i}`, 2, 1, ev.subarray(10)));
    await settle();
    return answered();
  };
  const tags = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `e${String(from + i).padStart(2, "0")}`);

  it("16 unfinished events are all kept", async () => {
    assert.deepEqual(await openThenFinish(16), tags(0, 16));
  });

  it("a 17th unfinished event is dropped; the 16 waiting are finished", async () => {
    assert.deepEqual(await openThenFinish(17), tags(0, 16));
  });

  const bytesHeld = async (lastFirstPart: number): Promise<string[]> => {
    const { fake, settle, answered } = await setup();
    const parts: Array<[string, number]> = [["big1", 6 * MiB], ["big2", 6 * MiB], ["big3", lastFirstPart]];
    const evs = parts.map(([tag, first]) => [tag, event(tag, first + 100), first] as const);
    for (const [tag, ev, first] of evs) fake.sendFragment(`fm_${tag}`, 2, 0, ev.subarray(0, first));
    for (const [tag, ev, first] of [...evs].reverse()) fake.sendFragment(`fm_${tag}`, 2, 1, ev.subarray(first));
    await settle();
    return answered();
  };

  it("unfinished events holding 16 MiB together are all kept", async () => {
    assert.deepEqual(await bytesHeld(4 * MiB), ["big1", "big2", "big3"]);
  });

  it("a fragment that would make them hold one byte past 16 MiB drops its own event", async () => {
    assert.deepEqual(await bytesHeld(4 * MiB + 1), ["big1", "big2"]);
  });
});

describe("feishu fragments: an event that never finishes", () => {
  it("is dropped 30 s after its first fragment, with no other traffic needed; at 29.999 s it is still assembled", async () => {
    const timers = new ManualTimers();
    const { fake, settle, answered } = await setup(timers);
    const at = event("at");
    fake.sendFragment("fm_at", 2, 0, at.subarray(0, 10));
    await settle();
    timers.advance(29_999);
    fake.sendFragment("fm_at", 2, 1, at.subarray(10));
    await settle();
    assert.deepEqual(answered(), ["at"]);
    const past = event("past");
    fake.sendFragment("fm_past", 2, 0, past.subarray(0, 10));
    await settle();
    timers.advance(30_000);
    fake.sendFragment("fm_past", 2, 1, past.subarray(10));
    await settle();
    assert.deepEqual(answered(), ["at"]);
  });
});

describe("feishu: one-frame events and the frame bound", () => {
  it("an event in one frame is read up to 8 MiB; one byte more is dropped", async () => {
    const { fake, settle, answered } = await setup();
    fake.sendFragment("fm_at", 1, 0, event("at", 8 * MiB));
    fake.sendFragment("fm_past", 1, 0, event("past", 8 * MiB + 1));
    await settle();
    assert.deepEqual(answered(), ["at"]);
  });

  it("a WebSocket message over the frame bound closes the link, says why, and the bridge reconnects", async () => {
    const { fake, comp, settle } = await setup();
    fake.sendRaw(Buffer.alloc(MAX_FRAME_BYTES, 0xff)); // at the bound: read (and dropped as unreadable); the link stays
    await settle();
    assert.equal(fake.connections, 1);
    const told = comp.health.until((h) => h.error === OVERSIZED_FRAME);
    fake.sendRaw(Buffer.alloc(MAX_FRAME_BYTES + 1, 0xff));
    await told;
    await comp.health.until((h) => h.state === "connected");
    assert.equal(fake.connections, 2);
    await settle(); // events flow on the new link
  });
});
