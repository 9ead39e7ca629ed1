/**
 * A backend's streamed text over the host's per-event text bound (MAX_TEXT, 1 MiB): the `text_delta` or
 * `thinking_delta` is refused to the backend as before, and the AHP clients watching the turn see a note in the
 * answer that the backend's text was refused, naming the size and the bound (before, their answer silently missed
 * that text). At the bound the text is kept as it is.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";
import { MAX_TEXT } from "../../src/protocols/host/backend-schema.js";

const markdown = (turn: Json): string[] => (turn.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content as string);

test("a text or thinking delta over 1 MiB: refused to the backend, and the client's answer notes the missing text; at the bound it is kept", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "big-text" });
    const { c } = await AhpClient.init(h, [reg.session, reg.chat]);
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    ev({ type: "user_message", text: "write a lot", turnId: "t1" });
    ev({ type: "text_delta", text: "a".repeat(MAX_TEXT) });
    ev({ type: "text_delta", text: "p".repeat(MAX_TEXT + 1) });
    ev({ type: "thinking_delta", text: "r".repeat(MAX_TEXT + 1) });
    ev({ type: "text_delta", text: " and on" });

    const refusals = [await be.next((f) => f.type === "error", "the text refusal"), await be.next((f) => f.type === "error", "the thinking refusal")];
    for (const r of refusals) {
      assert.equal(r.code, "validation_error");
      assert.match(r.message, /^event refused: /);
    }
    assert.equal(be.closed, false, "the refusal stays non-fatal on this route");

    const notes = [
      await c.action((e) => e.action.type === "chat/responsePart" && /text_delta/.test(e.action.part.content ?? ""), "the note for the text", 3000),
      await c.action((e) => e.action.type === "chat/responsePart" && /thinking_delta/.test(e.action.part.content ?? ""), "the note for the reasoning", 3000),
    ];
    for (const n of notes) {
      assert.equal(n.action.part.kind, "markdown", "a visible part of the answer");
      assert.equal(n.action.turnId, "t1");
      const text: string = n.action.part.content;
      assert.match(text, /1048577 characters/);
      assert.match(text, /at most 1048576 \(1 MiB\) per event/);
      assert.match(text, /missing from this answer/);
      assert.ok(text.length < 1024, "the client gets the note, not the text");
    }

    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "t1", "turn end", 3000);
    const turn = h.state.chatIndex.get(reg.chat)!.turns.at(-1) as Json;
    const parts = markdown(turn);
    assert.equal(parts[0], "a".repeat(MAX_TEXT), "the delta at the bound is kept whole");
    assert.equal(parts.length, 4, "the kept text, two notes, the text after them");
    assert.equal(parts[3], " and on", "the turn goes on after the refusal");
    assert.ok(!parts.some((p) => p.includes("ppp")), "nothing of the refused text");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("a sequenced delta over 1 MiB on a multiplexed route: rejected as before (the route retires), and the client is told", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 10, ["prov"]);
    be.send({ type: "register_session", requestId: "r1", hello: { protocolVersion: 10, instanceId: "i1", sourceId: "mux-big", provider: "prov", displayName: "P", title: "T", cwd: "/w" } });
    const reg = (await be.next((f) => f.type === "session_registered", "registration")).registration as Json;
    const { c } = await AhpClient.init(h, [reg.session, reg.chat]);
    const seq = (sequence: number, event: Json) => be.send({ type: "sequenced_event", session: reg.session, sequence, backendConnectionId: reg.backendConnectionId, event });
    seq(1, { type: "user_message", text: "go", turnId: "m1" });
    seq(2, { type: "text_delta", text: "x".repeat(MAX_TEXT + 1) });
    const rejected = await be.next((f) => f.type === "event_rejected", "the rejection");
    assert.equal(rejected.sequence, 2);
    const note = await c.action((e) => e.action.type === "chat/responsePart" && e.action.turnId === "m1", "the note", 3000);
    assert.match(note.action.part.content, /text_delta of 1048577 characters.*at most 1048576 \(1 MiB\) per event/s);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
