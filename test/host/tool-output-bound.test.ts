/**
 * A backend's tool output over the host's per-event text bound (MAX_TEXT, 1 MiB): the event is refused to the
 * backend as before, and the AHP client sees the tool call end, failed, with a message naming the bound (its card
 * stayed "running" forever). At the bound the output is accepted as it is.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";
import { MAX_TEXT } from "../../src/protocols/host/backend-schema.js";

test("tool output over 1 MiB: the backend is refused and the client's tool call ends failed, naming the bound; at the bound it is kept", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "big-tool" });
    const { c } = await AhpClient.init(h, [reg.session, reg.chat]);
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    ev({ type: "user_message", text: "run them", turnId: "t1" });
    ev({ type: "tool_started", toolCallId: "at", toolName: "bash", input: "{}" });
    ev({ type: "tool_started", toolCallId: "past", toolName: "bash", input: "{}" });
    ev({ type: "tool_completed", toolCallId: "at", toolName: "bash", output: "a".repeat(MAX_TEXT), isError: false });
    ev({ type: "tool_completed", toolCallId: "past", toolName: "bash", output: "p".repeat(MAX_TEXT + 1), isError: false });

    const at = await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.toolCallId === "at", "the call at the bound");
    assert.equal(at.action.result.success, true);
    assert.equal(at.action.result.content[0].text.length, MAX_TEXT);

    const past = await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.toolCallId === "past", "the call past the bound ends");
    assert.equal(past.action.result.success, false);
    const text: string = past.action.result.content[0].text;
    assert.match(text, /1048577 characters/);
    assert.match(text, /at most 1048576 \(1 MiB\)/);
    assert.ok(text.length < 1024, "the client gets the message, not the output");

    const refused = await be.next((f) => f.type === "error", "the backend's refusal");
    assert.equal(refused.code, "validation_error");
    assert.match(refused.message, /tool_completed output is 1048577 characters.*at most 1048576 \(1 MiB\)/);
    assert.equal(be.closed, false, "the refusal stays non-fatal on this route");

    // The turn goes on and ends normally; the tool call stays failed.
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "t1", "turn end");
    const turn = h.state.chatIndex.get(reg.chat)!.turns.at(-1) as Json;
    const calls = (turn.responseParts as Json[]).filter((p) => p.kind === "toolCall").map((p) => [p.toolCall.toolCallId, p.toolCall.status, p.toolCall.success]);
    assert.deepEqual(calls, [["at", "completed", true], ["past", "completed", false]]);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
