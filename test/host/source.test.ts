/**
 * Backend protocol v11–v14 as this host interprets them (docs/host.md, "Source reconciliation
 * (v11–v14)"): source-identity-checked turn snapshots and per-chat source cursors (v11), ordered
 * snapshot batches with a durable accepted-prefix acknowledgement (v12), snapshots carried as
 * digest-checked text resources (v13). The identity image (v14) is in identity-image.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";

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
