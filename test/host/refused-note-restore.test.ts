/**
 * A refused-delta note (a text or thinking delta over 1 MiB becomes a note part whose ID ends `-refused`) in a turn
 * running when the host stops: after the restart the note is still the note. Later text of that turn starts a part of
 * its own instead of being appended to the note, the note is not duplicated, and a second note gets a fresh part ID.
 * Real sockets: a fake backend over the backend socket, an AHP client over the WebSocket, one state directory.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { MAX_TEXT } from "../../src/protocols/host/backend-schema.js";
import { reduceChat, type Chat } from "../../src/client/ahp/reducer.js";

const hello = { protocolVersion: 9, sourceId: "note-src", instanceId: "inst-1", provider: "other" };
const isNote = (p: Json) => typeof p.id === "string" && p.id.endsWith("-refused");

/** Host 1: a turn streams text, then a delta over the bound (the note); the host stops with the turn running. */
async function stoppedAfterNote(home: string): Promise<Json> {
  let reg: Json = {};
  await withHost(
    async (h) => {
      const first = await FakeBackend.session(h, hello);
      reg = first.reg;
      const { c } = await AhpClient.init(h, [reg.chat]);
      const ev = (event: Json) => first.be.send({ type: "event", session: reg.session, event });
      ev({ type: "user_message", text: "write", turnId: "t1" });
      ev({ type: "text_delta", text: "before" });
      ev({ type: "text_delta", text: "x".repeat(MAX_TEXT + 1) });
      await c.action((e) => e.action.type === "chat/responsePart" && isNote(e.action.part), "the note");
      c.close();
      first.be.close();
    },
    { home },
  );
  return reg;
}

/** Host 2: the restored turn, then `events` from the same runtime and its settlement; the turn's parts as it ended. */
async function afterRestart(home: string, reg: Json, events: Json[]): Promise<Json[]> {
  return withHost(
    async (h) => {
      const { c, result } = await AhpClient.init(h, [reg.chat]);
      const snap = (result.snapshots as Json[]).find((x) => x.resource === reg.chat)!;
      const restored = snap.state.activeTurn as Json;
      assert.deepEqual(
        (restored.responseParts as Json[]).map((p) => (isNote(p) ? "note" : p.content)),
        ["before", "note"],
        "the restored turn ends with the note",
      );
      const { be } = await FakeBackend.session(h, hello);
      for (const event of [...events, { type: "settled", cancelled: false }]) be.send({ type: "event", session: reg.session, event });
      await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1", "the restored turn's end");
      const parts = h.state.chatIndex.get(reg.chat)!.turns.find((t) => t.id === "t1")!.responseParts as Json[];
      const ids = parts.filter((p) => p.id !== undefined).map((p) => p.id as string);
      assert.equal(new Set(ids).size, ids.length, `part IDs unique within the turn: ${ids.join(", ")}`);
      // The client's own reducer, from the snapshot and the envelopes, reaches the same turn.
      const mirror = structuredClone(snap.state) as Chat;
      mirror.queuedMessages ??= [];
      for (const e of c.actions(reg.chat)) if (e.rejectionReason === undefined) reduceChat(mirror, e.action);
      assert.deepEqual((mirror.turns.find((t) => t.id === "t1") as Json).responseParts, parts);
      assert.deepEqual(c.invalid, []);
      c.close();
      be.close();
      return parts.filter((p) => p.kind === "markdown").map((p) => (isNote(p) ? "note" : p.content));
    },
    { home },
  );
}

const text = (t: string): Json => ({ type: "text_delta", text: t });
const oversize = (): Json => ({ type: "text_delta", text: "y".repeat(MAX_TEXT + 1) });

test("text after a restart that restored a turn ending in a refused-delta note starts its own part; the note stays one", async () => {
  const home = tempHome();
  const reg = await stoppedAfterNote(home);
  assert.deepEqual(await afterRestart(home, reg, [text("after"), text(" more")]), ["before", "note", "after more"]);
});

test("finding: a refused-delta note right after a restart reused the restored note's part ID; it gets a fresh one", async () => {
  const home = tempHome();
  const reg = await stoppedAfterNote(home);
  assert.deepEqual(await afterRestart(home, reg, [oversize(), text("after"), text(" more")]), ["before", "note", "note", "after more"]);
});
