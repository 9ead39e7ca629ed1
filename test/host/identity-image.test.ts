/**
 * The v14 identity image (docs/host.md, "v14 `profile_image_changed` event"): a sequenced set/clear event
 * for the session's `paratenic.identity` metadata, bounded in bytes and pixels, type-checked against the
 * image's own header, durable before its acknowledgement and published as session metadata.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { IDENTITY_IMAGE_BYTES } from "../../src/protocols/host/source-events.js";
import { gif, jpeg, png, vp8, vp8l, vp8x, webp } from "./image-builders.js";

const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });

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

test("v14 JPEG, GIF and WebP images must state their declared size in their own header (1,024 a side at and one past)", () =>
  withHost(async (h) => {
    const img = (mimeType: string, bytes: Buffer, width: number, height: number) => ({ mimeType, data: bytes.toString("base64"), width, height });
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 14, sourceId: "hdr" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session]);
    const accepted: Array<[string, Json]> = [
      ["GIF 2x3", img("image/gif", gif(2, 3), 2, 3)],
      ["GIF 1024x1024 (a 1x1 frame on the screen)", img("image/gif", gif(1024, 1024, { w: 1, h: 1 }), 1024, 1024)],
      ["JPEG 2x3", img("image/jpeg", jpeg(2, 3), 2, 3)],
      ["JPEG 1024x1024", img("image/jpeg", jpeg(1024, 1024), 1024, 1024)],
      ["WebP lossless 2x3", img("image/webp", webp(vp8l(2, 3)), 2, 3)],
      ["WebP lossless 1024x1024", img("image/webp", webp(vp8l(1024, 1024)), 1024, 1024)],
      ["WebP extended 2x3", img("image/webp", webp(vp8x(2, 3), vp8l(2, 3)), 2, 3)],
      ["WebP lossy 2x3", img("image/webp", webp(vp8()), 2, 3)],
    ];
    let seq = 0;
    for (const [what, image] of accepted) {
      be.send({ type: "sequenced_event", session: reg.session, sequence: ++seq, event: { type: "profile_image_changed", image } });
      const ack = await be.next((f) => f.type === "event_ack" || f.type === "event_rejected", what);
      assert.equal(ack.type, "event_ack", `${what}: ${String(ack.error)}`);
      const meta = await c.action((e) => e.action.type === "session/metaChanged" && e.action._meta["paratenic.identity"]?.image.data === image.data, what);
      assert.deepEqual(meta.action._meta["paratenic.identity"], { image });
    }
    be.close();

    const refused: Array<[string, Json, RegExp]> = [
      ["a GIF declared 3x2", img("image/gif", gif(2, 3), 3, 2), /width\/height \(3x2\) do not match the GIF header \(2x3\)/],
      // Decoders grow the canvas to a first frame larger than the screen: Chromium shows this one as 300x200.
      ["a 1x1 GIF screen whose frame is 300x200", img("image/gif", gif(1, 1, { w: 300, h: 200 }), 1, 1), /not image\/gif.*outside the 1x1 logical screen/],
      ["a GIF whose screen is one past the bound", img("image/gif", gif(1025, 1024, { w: 1, h: 1 }), 1024, 1024), /do not match the GIF header \(1025x1024\)/],
      ["a JPEG whose frame header states 4000x3000", img("image/jpeg", jpeg(2, 3, { w: 4000, h: 3000 }), 2, 3), /do not match the JPEG header \(4000x3000\)/],
      ["a JPEG with no frame header", img("image/jpeg", Buffer.from([0xff, 0xd8, 0xff, 0xd9]), 1, 1), /not image\/jpeg/],
      ["a lossless WebP one past the bound", img("image/webp", webp(vp8l(1025, 1024)), 1024, 1024), /do not match the WebP header \(1025x1024\)/],
      ["an extended WebP whose canvas is 60000x60000", img("image/webp", webp(vp8x(60000, 60000), vp8l(1, 1)), 1, 1), /do not match the WebP header \(60000x60000\)/],
      ["a lossy WebP declared 3x2", img("image/webp", webp(vp8()), 3, 2), /do not match the WebP header \(2x3\)/],
      ["a WebP whose first chunk is no image", img("image/webp", webp(Buffer.from("ICCP\0\0\0\0", "latin1"), vp8l(1, 1)), 1, 1), /not image\/webp/],
    ];
    for (const [what, image, why] of refused) {
      const r = await FakeBackend.session(h, { protocolVersion: 14, sourceId: "hdr" });
      r.be.send({ type: "sequenced_event", session: reg.session, sequence: 1, event: { type: "profile_image_changed", image } });
      const f = await r.be.next((x) => x.type === "event_ack" || x.type === "event_rejected", what);
      assert.equal(f.type, "event_rejected", `${what} was accepted`);
      assert.match(f.error, why, what);
      r.be.close();
    }
    const kept = h.state.sessions.get(reg.session)!.extra.identityImage as Json;
    assert.equal(kept.data, accepted[accepted.length - 1]![1].data, "a refused image leaves the previous one");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));
