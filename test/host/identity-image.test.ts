/**
 * The v14 identity image (docs/host.md, "v14 `profile_image_changed` event"): a sequenced set/clear event
 * for the session's `paratenic.identity` metadata, bounded in bytes and pixels, type-checked against the
 * image's own header, durable before its acknowledgement and published as session metadata.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { IDENTITY_IMAGE_BYTES } from "../../src/protocols/host/source-events.js";

const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });

const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b: Buffer): number {
  let c = 0xffffffff;
  for (const x of b) c = CRC[(c ^ x) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
/** A real PNG of `w`×`h`, padded with an ancillary chunk to exactly `total` bytes when given. */
function png(w: number, hgt: number, total?: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(hgt, 4);
  ihdr.set([8, 0, 0, 0, 0], 8);
  const raw = Buffer.alloc((w + 1) * hgt);
  const head = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", Buffer.from([0x78, 0x01, ...deflateStored(raw)]))]);
  const end = chunk("IEND", Buffer.alloc(0));
  const pad = total === undefined ? [] : [chunk("tEXt", Buffer.alloc(total - head.length - end.length - 12, 0x61))];
  return Buffer.concat([head, ...pad, end]);
}
function deflateStored(b: Buffer): number[] {
  const out = [1, b.length & 0xff, b.length >> 8, ~b.length & 0xff, (~b.length >> 8) & 0xff, ...b];
  let a = 1;
  let s2 = 0;
  for (const x of b) {
    a = (a + x) % 65521;
    s2 = (s2 + a) % 65521;
  }
  return [...out, (s2 >> 8) & 0xff, s2 & 0xff, (a >> 8) & 0xff, a & 0xff];
}

test("v14 profile_image_changed: bounded, type-checked, durable before the ACK, published as paratenic.identity", async () => {
  const home = tempHome();
  let sessionUri = "";
  const image = (bytes: Buffer, extra: Json = {}) => ({ mimeType: "image/png", data: bytes.toString("base64"), width: 2, height: 3, ...extra });
  await withHost(
    async (h) => {
      const v13 = await FakeBackend.session(h, { protocolVersion: 13, sourceId: "i13" });
      v13.be.send(ev(v13.reg, { type: "profile_image_changed", image: null }));
      assert.match((await v13.be.nextType("error")).message, /requires protocol version 14/);
      v13.be.close();

      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 14, sourceId: "i14" });
      sessionUri = reg.session;
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.session]);
      let seq = 0;
      const send = (img: Json | null) => be.send({ type: "sequenced_event", session: reg.session, sequence: ++seq, event: { type: "profile_image_changed", image: img } });
      // Exactly at the byte bound: accepted, durable, then acknowledged, then published.
      const atLimit = png(2, 3, IDENTITY_IMAGE_BYTES);
      assert.equal(atLimit.length, IDENTITY_IMAGE_BYTES);
      send(image(atLimit));
      assert.equal((await be.nextType("event_ack")).sequence, 1);
      const meta = await c.action((e) => e.action.type === "session/metaChanged");
      assert.deepEqual(meta.action._meta["paratenic.identity"], { image: image(atLimit) });
      const list = await c.request("listSessions", { channel: "ahp-root://" });
      assert.ok(!JSON.stringify(list.result).includes(atLimit.toString("base64").slice(0, 64)), "image bytes never travel in summaries");
      be.close();

      // Refusals (each retires the dedicated route, so each uses a fresh registration).
      const cases: Array<[Json, RegExp]> = [
        [image(png(2, 3, IDENTITY_IMAGE_BYTES + 1)), /1\.\.262144 bytes|data/],
        [image(png(2, 3), { width: 4 }), /do not match the PNG header/],
        [image(png(2, 3), { mimeType: "image/jpeg" }), /not image\/jpeg/],
        // The signature and a size at IHDR's offsets, but no IHDR chunk: not a PNG header stating the size.
        [image(Buffer.concat([png(2, 3).subarray(0, 8), Buffer.from("0000XXXX", "latin1"), png(2, 3).subarray(16)])), /not image\/png/],
        [image(png(2, 3), { width: 1025 }), /width/],
        [{ mimeType: "image/svg+xml", data: "PHN2Zy8+", width: 1, height: 1 }, /mimeType/],
      ];
      for (const [img, why] of cases) {
        const r = await FakeBackend.session(h, { protocolVersion: 14, sourceId: "i14" });
        r.be.send({ type: "sequenced_event", session: reg.session, sequence: 1, event: { type: "profile_image_changed", image: img } });
        const rej = await r.be.nextType("event_rejected");
        assert.match(rej.error, why);
        r.be.close();
      }
      assert.deepEqual((h.state.sessions.get(reg.session)!.extra.identityImage as Json).data, atLimit.toString("base64"), "a refused image leaves the previous one");
      assert.deepEqual(c.invalid, []);
      c.close();
    },
    { home },
  );
  await withHost(
    async (h) => {
      // The image survived a restart; the owning backend clears it.
      const { c } = await AhpClient.init(h, ["ahp-root://", sessionUri]);
      const snap = (await c.request("subscribe", { channel: sessionUri })).result.snapshot.state;
      assert.equal(snap._meta["paratenic.identity"].image.width, 2);
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 14, sourceId: "i14" });
      be.send({ type: "sequenced_event", session: reg.session, sequence: 1, event: { type: "profile_image_changed", image: null } });
      await be.nextType("event_ack");
      const cleared = await c.action((e) => e.action.type === "session/metaChanged");
      assert.equal(cleared.action._meta["paratenic.identity"], undefined);
      assert.deepEqual(c.invalid, []);
      c.close();
      be.close();
    },
    { home },
  );
});

test("v14 profile_image_changed must be sequenced: an unsequenced one is refused and changes nothing", () =>
  withHost(async (h) => {
    const img = { mimeType: "image/png", data: png(2, 3).toString("base64"), width: 2, height: 3 };
    // Dedicated connection: refused (the spec's durable acknowledgement is the event_ack), the route stays.
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 14, sourceId: "u14" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session]);
    const refusal = async (frame: Json): Promise<Json> => {
      be.send(frame);
      await be.roundTrip(); // the frame was handled: its answer, if any, is here
      const i = be.frames.findIndex((f) => f.type === "error");
      assert.ok(i >= 0, `${frame.type as string} carrying profile_image_changed was accepted`);
      return be.frames.splice(i, 1)[0]!;
    };
    const refused = await refusal(ev(reg, { type: "profile_image_changed", image: img }));
    assert.equal(refused.code, "validation_error");
    assert.equal(refused.sequence, 0);
    assert.match(refused.message, /profile_image_changed must be a sequenced_event/);
    const viaChat = await refusal({ type: "chat_event", session: reg.session, chat: reg.chat, event: { type: "profile_image_changed", image: null } });
    assert.match(viaChat.message, /must be a sequenced_event/);
    assert.equal(h.state.sessions.get(reg.session)!.extra.identityImage, undefined);
    // The same image, sequenced, is accepted: the refusal was about the frame, not the image.
    be.send({ type: "sequenced_event", session: reg.session, sequence: 1, event: { type: "profile_image_changed", image: img } });
    assert.equal((await be.nextType("event_ack")).sequence, 1);
    await c.action((e) => e.action.type === "session/metaChanged");
    const metas = c.actions(reg.session).filter((e) => e.action.type === "session/metaChanged");
    assert.equal(metas.length, 1, "nothing was published for the unsequenced frames (handled before the sequenced one)");
    // Multiplexed v14 route: a semantic rejection with sequence 0 that retires only the route.
    const p = await FakeBackend.provider(h, 14);
    p.be.send({ type: "register_session", requestId: "m", hello: { protocolVersion: 14, instanceId: "m", provider: "prov", sourceId: "m14" } });
    const m = await p.be.next((f) => f.requestId === "m");
    p.be.send({ type: "event", session: m.session, backendConnectionId: m.backendConnectionId, event: { type: "profile_image_changed", image: img } });
    const rj = await p.be.nextType("event_rejected");
    assert.equal(rj.sequence, 0);
    assert.equal(rj.backendConnectionId, m.backendConnectionId);
    assert.equal(h.state.sessions.get(m.session)!.extra.identityImage, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
    p.be.close();
  }));
