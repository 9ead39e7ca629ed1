/**
 * Bounds of the newest families that an attacker backend could otherwise stretch to the frame limit (found while
 * fuzzing): a chat's changeset catalogue keeps unknown entry fields and persists with the chat, so each entry is
 * bounded in encoded bytes. Exactly the bound is accepted (and survives a restart), one byte more is refused with the
 * fixed message and the connection kept. Fake v6 backend over the real socket, AHP client over the real WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { startHost } from "../../src/protocols/host/host.js";
import { MAX_CHAT_CHANGESETS, MAX_CHAT_CHANGESET_BYTES } from "../../src/protocols/host/chat-09.js";

const bytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v));

test("a chat changeset catalogue entry: at the byte bound accepted and persisted, one byte past refused", async () => {
  const home = tempHome();
  let chat = "";
  let accepted: Json[] = [];
  const h1 = await startHost({ home, log: () => {} });
  try {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "cs-bytes" });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    chat = reg.chat as string;
    const { c } = await AhpClient.init(h1, [chat], "cs-bytes");
    const entry = (i: number, size: number): Json => {
      const e: Json = { label: `L${i}`, uriTemplate: `ahp-changeset:/c/${i}/{id}`, changeKind: "edit", note: "" };
      e.note = "n".repeat(size - bytes(e));
      return e;
    };
    const atBound = Array.from({ length: MAX_CHAT_CHANGESETS }, (_, i) => entry(i, MAX_CHAT_CHANGESET_BYTES));
    assert.equal(bytes(atBound[0]), MAX_CHAT_CHANGESET_BYTES);
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", channel: chat, action: { type: "chat/changesetsChanged", changesets: atBound } } });
    await c.action((e) => e.action.type === "chat/changesetsChanged", "accepted at the bound", 10_000);
    const past = atBound.map((e, i) => (i === 7 ? { ...e, note: `${e.note as string}x` } : e));
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", channel: chat, action: { type: "chat/changesetsChanged", changesets: past } } });
    assert.equal((await be.nextType("error")).message, `event refused: chat/changesetsChanged: changesets.7 exceeds ${MAX_CHAT_CHANGESET_BYTES} bytes encoded`);
    await be.roundTrip();
    assert.equal(be.closed, false, "the connection is kept");
    accepted = (await c.request("subscribe", { channel: chat })).result.snapshot.state.changesets as Json[];
    assert.deepEqual(accepted, atBound, "the refused catalogue changed nothing");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  } finally {
    await h1.close();
  }
  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [], "cs-after");
    assert.deepEqual((await c.request("subscribe", { channel: chat })).result.snapshot.state.changesets, accepted, "persisted with the chat");
    c.close();
  }, { home });
});
