/**
 * Backend protocol v11–v14 as this host interprets them (docs/host.md, "Source reconciliation
 * (v11–v14)"): source-identity-checked turn snapshots and per-chat source cursors (v11), ordered
 * snapshot batches with a durable accepted-prefix acknowledgement (v12), snapshots carried as
 * digest-checked text resources (v13), and the identity image (v14).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { IDENTITY_IMAGE_BYTES } from "../../src/protocols/host/source-events.js";

const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });
async function quiet(be: FakeBackend): Promise<void> {
  be.send({ type: "ping", id: "q" });
  await be.next((f) => f.type === "pong" && f.id === "q");
}
const turn = (id: string, extra: Json = {}) => ({ id, startedAt: "2026-12-01T10:00:00.000Z", userText: `q ${id}`, responseText: `a ${id}`, ...extra });

test("v11 source_turn: identity-checked placement, closed turns published whole and immutable, live turns only extended", () =>
  withHost(async (h) => {
    const old = await FakeBackend.session(h, { protocolVersion: 10, sourceId: "v10-src", history: [turn("h0")] });
    assert.equal(old.reg.sourceCursor, "h0");
    assert.equal(old.reg.sourceCursors, undefined, "sourceCursors is a v11 field");
    old.be.send(ev(old.reg, { type: "source_turn", sourceId: "v10-src", active: false, historyOnly: true, turn: turn("x") }));
    assert.match((await old.be.nextType("error")).message, /requires protocol version 11/);
    old.be.close();

    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 11, sourceId: "src-11", history: [turn("h1")] });
    assert.deepEqual(reg.sourceCursors, { [reg.chat]: "h1" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    be.send(ev(reg, { type: "source_turn", sourceId: "someone-else", active: false, historyOnly: true, turn: turn("h2") }));
    assert.match((await be.nextType("error")).message, /source identity mismatch/);
    be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: true, historyOnly: true, turn: turn("h2") }));
    assert.match((await be.nextType("error")).message, /history-only snapshot cannot be active/);

    // A closed history turn: start, parts and end in one step.
    be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: false, historyOnly: true, turn: turn("h2", { reasoningText: "think" }) }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "h2");
    const types = c.actions(reg.chat).map((e) => e.action.type);
    assert.deepEqual(types, ["chat/turnStarted", "chat/responsePart", "chat/responsePart", "chat/turnComplete"]);
    // Re-sending a held turn is a no-op; it is never rewritten.
    be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: false, historyOnly: true, turn: turn("h2", { responseText: "changed" }) }));
    await quiet(be);
    assert.equal(c.actions(reg.chat).length, 4);
    assert.equal(be.frames.some((f) => f.type === "error"), false);

    // A live source turn: started with its content so far, then only extended, then closed.
    const req = { id: "in1", turnId: "live", message: "ok?" };
    be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: true, historyOnly: false, turn: turn("live", { responseText: "Hel" }) }));
    await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "live");
    const be2 = await FakeBackend.session(h, { protocolVersion: 11, sourceId: "src-11", inputCapabilities: { freeform: true } });
    be2.be.send(ev(reg, { type: "input_requested", request: req }));
    await c.action((e) => e.action.type === "session/inputNeededSet");
    be2.be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: true, historyOnly: false, turn: turn("live", { responseText: "Xyz" }) }));
    assert.match((await be2.be.nextType("error")).message, /does not extend the live transcript/);
    be2.be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: true, historyOnly: false, turn: turn("other") }));
    assert.match((await be2.be.nextType("error")).message, /cannot be placed before it settles/);
    be2.be.send(ev(reg, { type: "source_turn", sourceId: "src-11", active: false, historyOnly: false, turn: turn("live", { responseText: "Hello" }) }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "live");
    const added = c.actions(reg.chat).filter((e) => e.action.turnId === "live" && (e.action.type === "chat/delta" || e.action.type === "chat/responsePart") && e.action.part?.kind !== "inputRequest");
    assert.deepEqual(added.map((e) => e.action.content ?? e.action.part.content), ["Hel", "lo"], "only the extension is published");
    await c.action((e) => e.action.type === "session/inputNeededRemoved" && e.action.id === `input:${reg.chat}:in1`);
    const chat = h.state.chatIndex.get(reg.chat)!;
    assert.deepEqual(chat.turns.map((t) => t.id), ["h1", "h2", "live"]);
    const live = (chat.turns[2]!.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content as string);
    assert.equal(live.join(""), "Hello");
    assert.equal(h.state.sessions.get(reg.session)!.inputNeeded.size, 0);
    be2.be.close();
    // A later registration's cursors name the last held turn.
    const again = await FakeBackend.session(h, { protocolVersion: 11, sourceId: "src-11" });
    assert.deepEqual(again.reg.sourceCursors, { [reg.chat]: "live" });
    assert.deepEqual(c.invalid, []);
    c.close();
    again.be.close();
  }));

test("v12 source_snapshot_batch: ordered, stops at the first refusal, the acknowledged prefix is durable", async () => {
  const home = tempHome();
  let chatUri = "";
  await withHost(
    async (h) => {
      const v11 = await FakeBackend.session(h, { protocolVersion: 11, sourceId: "b11" });
      v11.be.send({ type: "source_snapshot_batch", session: v11.reg.session, batchId: "b0", snapshots: [{ sourceId: "b11", active: false, historyOnly: true, turn: turn("z") }] });
      const a11 = await v11.be.nextType("source_snapshot_batch_ack");
      assert.equal(a11.accepted, 0);
      assert.match(a11.error, /requires protocol version 12/);
      v11.be.close();

      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 12, sourceId: "b12" });
      chatUri = reg.chat;
      const snap = (id: string, extra: Json = {}) => ({ sourceId: "b12", active: false, historyOnly: true, turn: turn(id), ...extra });
      be.send({ type: "source_snapshot_batch", session: reg.session, batchId: "b1", snapshots: [snap("t1"), snap("t2"), snap("t3", { sourceId: "wrong" }), snap("t4")] });
      const ack = await be.nextType("source_snapshot_batch_ack");
      assert.equal(ack.batchId, "b1");
      assert.equal(ack.accepted, 2);
      assert.equal(ack.total, 4);
      assert.equal(ack.lastTurnId, "t2");
      assert.match(ack.error, /^snapshot 2: source identity mismatch/);
      assert.equal(ack.backendConnectionId, reg.backendConnectionId);
      assert.deepEqual(h.state.chatIndex.get(reg.chat)!.turns.map((t) => t.id), ["t1", "t2"], "nothing after the refused snapshot");
      // The route survives a partial batch and the rest can follow.
      be.send({ type: "source_snapshot_batch", session: reg.session, batchId: "b2", snapshots: [snap("t3"), snap("t4")] });
      const ack2 = await be.nextType("source_snapshot_batch_ack");
      assert.equal(ack2.accepted, 2);
      assert.equal(ack2.error, undefined);
      be.send({ type: "source_snapshot_batch", session: "ahp-session:/not-mine", batchId: "b3", snapshots: [snap("t5")] });
      assert.equal((await be.nextType("error")).code, "authority_error");
      be.close();
    },
    { home },
  );
  // A restarted host holds the acknowledged turns.
  await withHost(
    (h) => {
      assert.deepEqual(h.state.chatIndex.get(chatUri)!.turns.map((t) => t.id), ["t1", "t2", "t3", "t4"]);
      return Promise.resolve();
    },
    { home },
  );
});

test("v12 batches follow the epoch rules: a stale or foreign generation and, after re-registration, an omitted one apply nothing", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const p = await FakeBackend.provider(h, 12, ["mux"]);
    const hello = { protocolVersion: 12, instanceId: "s1", sourceId: "ep12", provider: "mux" };
    const batch = (session: string, batchId: string, id: string, extra: Json = {}, sourceId = "ep12") => ({ type: "source_snapshot_batch", session, batchId, snapshots: [{ sourceId, active: false, historyOnly: true, turn: turn(id) }], ...extra });
    p.be.send({ type: "register_session", requestId: "r1", hello });
    const first = (await p.be.nextType("session_registered")).registration as Json;
    await c.request("subscribe", { channel: first.chat });
    p.be.send(batch(first.session, "legacy", "t1")); // the first epoch may omit its ID
    assert.equal((await p.be.nextType("source_snapshot_batch_ack")).accepted, 1);
    p.be.send({ type: "register_session", requestId: "r2", hello });
    const second = (await p.be.nextType("session_registered")).registration as Json;
    const turns = () => h.state.chatIndex.get(first.chat)!.turns.map((t) => t.id);

    p.be.send(batch(first.session, "queued-before", "t2")); // an old epoch's queued batch, no ID
    assert.deepEqual(await p.be.nextType("event_epoch_required"), { type: "event_epoch_required", session: first.session, batchId: "queued-before" });
    p.be.send(batch(first.session, "old-id", "t2", { backendConnectionId: first.backendConnectionId }));
    assert.deepEqual(await p.be.nextType("event_epoch_mismatch"), { type: "event_epoch_mismatch", session: first.session, batchId: "old-id", backendConnectionId: first.backendConnectionId });
    assert.deepEqual(turns(), ["t1"], "nothing of a refused batch is applied");
    // Neither refusal retired the new epoch.
    p.be.send(batch(first.session, "current", "t2", { backendConnectionId: second.backendConnectionId }));
    const ack = await p.be.nextType("source_snapshot_batch_ack");
    assert.deepEqual([ack.accepted, ack.backendConnectionId], [1, second.backendConnectionId]);
    assert.deepEqual(turns(), ["t1", "t2"]);

    // A dedicated connection: a generation other than its own is refused the same way.
    const d = await FakeBackend.session(h, { protocolVersion: 12, sourceId: "ep12-d" });
    d.be.send(batch(d.reg.session, "wrong", "t1", { backendConnectionId: second.backendConnectionId }, "ep12-d"));
    assert.equal((await d.be.nextType("event_epoch_mismatch")).batchId, "wrong");
    assert.equal(h.state.chatIndex.get(d.reg.chat)!.turns.length, 0);
    d.be.send(batch(d.reg.session, "own", "t1", { backendConnectionId: d.reg.backendConnectionId }, "ep12-d"));
    assert.equal((await d.be.nextType("source_snapshot_batch_ack")).accepted, 1);
    await c.action((e) => e.channel === first.chat && e.action.type === "chat/turnComplete" && e.action.turnId === "t2");
    assert.equal(c.actions(first.chat).filter((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "t2").length, 1, "t2 published once, by the current epoch");
    assert.deepEqual(c.invalid, []);
    c.close();
    p.be.close();
    d.be.close();
  }));

function resources(session: string, text: string, parts: number): Json[] {
  const size = Math.ceil(text.length / parts);
  const out: Json[] = [];
  for (let i = 0; i < parts; i++) {
    const chunk = text.slice(i * size, (i + 1) * size);
    out.push({ session, index: i, mimeType: "text/plain", digest: `sha256:${createHash("sha256").update(chunk, "utf8").digest("hex")}`, text: chunk });
  }
  return out;
}

test("v13 source_turn_resources: digest- and ownership-checked resources decode one snapshot; no whole-turn size limit", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 13, sourceId: "r13" });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
    const big = "x".repeat(3 * 1024 * 1024); // larger than a single v11 snapshot may carry
    be.send(ev(reg, { type: "source_turn", sourceId: "r13", active: false, historyOnly: true, turn: turn("small", { responseText: big }) }));
    assert.match((await be.nextType("error")).message, /turn.responseText/);
    const decoded = JSON.stringify({ sourceId: "r13", active: false, historyOnly: true, turn: turn("large", { responseText: big }) });
    const res = resources(reg.session, decoded, 7);
    const envelope = { type: "source_turn_resources", sourceId: "r13", active: false, historyOnly: true };
    // Refusals: digest, ownership, ordering, envelope disagreement.
    const bad = structuredClone(res);
    bad[3]!.text += " ";
    be.send(ev(reg, { ...envelope, resources: bad }));
    assert.match((await be.nextType("error")).message, /resource 3 does not match its digest/);
    const foreign = structuredClone(res);
    foreign[1]!.session = "ahp-session:/other";
    be.send(ev(reg, { ...envelope, resources: foreign }));
    assert.match((await be.nextType("error")).message, /resource 1 belongs to another session/);
    be.send(ev(reg, { ...envelope, resources: res.filter((r) => r.index !== 2) }));
    assert.match((await be.nextType("error")).message, /without gaps/);
    be.send(ev(reg, { ...envelope, active: true, historyOnly: false, resources: res }));
    assert.match((await be.nextType("error")).message, /envelope does not match/);
    assert.equal(c.actions(reg.chat).length, 0, "no partial turn was published");
    // Shuffled but complete: decoded in index order and applied whole.
    be.send(ev(reg, { ...envelope, resources: [...res].reverse() }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "large");
    const held = h.state.chatIndex.get(reg.chat)!.turns[0]!;
    assert.equal(((held.responseParts as Json[])[0]!.content as string).length, big.length, "no response byte dropped");
    const v12 = await FakeBackend.session(h, { protocolVersion: 12, sourceId: "r12" });
    v12.be.send(ev(v12.reg, { ...envelope, sourceId: "r12", resources: resources(v12.reg.session, "{}", 1) }));
    assert.match((await v12.be.nextType("error")).message, /requires protocol version 13/);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
    v12.be.close();
  }));

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
