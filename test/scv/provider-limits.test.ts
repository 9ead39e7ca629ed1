/**
 * The spec's provider read bounds as an SCV client sees them, over `berth stdio` and the daemon socket against the
 * loopback fake provider: a whole response of 4 MiB, assistant text of 1 MiB, a tool-argument object of 256 KiB and 32 tool calls in one
 * response complete the turn; one byte (or call) more ends it `turn.failed` with `response_limit` / `tool_limit`
 * and its fixed message (which bound, and what to ask of the model), no call of that response runs, and the same session then runs a normal turn.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { PROVIDER_BOUNDS as B } from "../../src/runtime/types.js";
import { openTransport, startRig, TRANSPORTS, type Msg, type Rig, type Transport } from "./client.js";

/** `bytes` of assistant text in 64 KiB deltas (each SSE event stays under its own 1 MiB bound). */
const text = (bytes: number): Msg[] => Array.from({ length: Math.ceil(bytes / 65536) }, (_, i) => ({ text: "a".repeat(Math.min(65536, bytes - i * 65536)) }));
/** A tool-argument object of exactly `bytes` bytes of JSON. */
const args = (bytes: number): string => `{"x":"${"a".repeat(bytes - 8)}"}`;
const calls = (n: number): Msg[] => Array.from({ length: n }, (_, i) => ({ toolCall: { id: `k${i}`, name: "nope", arguments: {} } }));

const TEXT = "the provider response exceeded a size limit: assistant text exceeds 1 MiB; ask for a shorter answer, or split the task into smaller steps";
const ARGS = "the provider's tool calls exceeded a size or count limit: tool call arguments exceed 256 KiB; ask the model to write large content in several smaller tool calls";
const COUNT = "the provider's tool calls exceeded a size or count limit: more than 32 tool calls in one response; ask the model for fewer tool calls at a time";

const RESPONSE = "the provider response exceeded a size limit: provider response exceeds 4 MiB; ask for a shorter answer, or split the task into smaller steps";

const CASES: Array<{ name: string; at: Msg; past: Msg; continues: boolean; code: string; message: string }> = [
  { name: "assistant text", at: { steps: text(B.maxAssistantTextBytes) }, past: { steps: text(B.maxAssistantTextBytes + 1) }, continues: false, code: "response_limit", message: TEXT },
  { name: "whole response", at: { steps: [{ text: "hi" }], totalBytes: B.maxResponseBytes }, past: { steps: [{ text: "hi" }], totalBytes: B.maxResponseBytes + 1 }, continues: false, code: "response_limit", message: RESPONSE },
  {
    name: "tool arguments",
    at: { steps: [{ toolCall: { id: "a", name: "nope", arguments: args(B.maxToolArgumentBytes), chunks: 8 } }] },
    past: { steps: [{ toolCall: { id: "a", name: "nope", arguments: args(B.maxToolArgumentBytes + 1), chunks: 8 } }] },
    continues: true,
    code: "tool_limit",
    message: ARGS,
  },
  { name: "tool calls", at: { steps: calls(B.maxToolCallsPerResponse) }, past: { steps: calls(B.maxToolCallsPerResponse + 1) }, continues: true, code: "tool_limit", message: COUNT },
];

for (const name of TRANSPORTS) {
  describe(`scv provider read bounds over ${name}`, () => {
    let rig: Rig;
    let t: Transport;
    before(async () => {
      rig = await startRig();
      t = await openTransport(name, rig);
    });
    after(async () => {
      await t.close();
      await rig.fake.close();
    });

    for (const cs of CASES) {
      it(`${cs.name}: at the bound the turn completes; one past is turn.failed ${cs.code}; the session goes on`, async () => {
        const c = await t.open();
        const sid = (await c.open()).session_id as string;
        rig.fake.script(cs.continues ? [cs.at, { steps: [{ text: "ok" }] }] : [cs.at]);
        const at = await c.turn(sid, "at");
        assert.equal(at.terminal.type, "turn.completed", JSON.stringify(at.terminal));
        if (cs.name === "assistant text") assert.equal(at.frames.find((m) => m.type === "assistant.completed")?.content.length, B.maxAssistantTextBytes);
        rig.fake.script([cs.past]);
        const past = await c.turn(sid, "past");
        assert.deepEqual([past.terminal.type, past.terminal.code], ["turn.failed", cs.code], JSON.stringify(past.terminal));
        assert.equal(past.terminal.message, cs.message);
        assert.deepEqual(past.frames.filter((m) => m.type === "tool.started"), [], "no call of the refused response runs");
        assert.equal((await c.turn(sid, "and now")).terminal.type, "turn.completed");
        assert.deepEqual(c.seqErrors, []);
        c.end();
        await c.closed;
      });
    }
  });
}
