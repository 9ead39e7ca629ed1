/**
 * The `question` tool on SCV (docs/scv.md "Questions"): asked approval-style while its call runs; approving tells
 * the model to ask in its reply, denying declines; chat-channel sessions are not offered the tool.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TRANSPORTS, type Msg } from "./client.js";
import { useRig } from "./rig.js";

const toolNames = (body: unknown): string[] => ((body as { tools?: Array<{ function?: { name: string } }> }).tools ?? []).map((t) => t.function?.name ?? "");
const lastToolResult = (body: unknown): string =>
  JSON.stringify(((body as { messages: Array<{ role: string; content: unknown }> }).messages.filter((m) => m.role === "tool").at(-1) ?? {}).content);

for (const name of TRANSPORTS) {
  describe(`scv questions over ${name}`, () => {
    const suite = useRig(name);

    it("asks approval-style; approve defers the answer to the next message, deny declines", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      for (const [approved, expect] of [
        [true, /cannot answer it here\. Ask it in your reply/],
        [false, /The user declined to answer/],
      ] as const) {
        suite.rig.fake.script([{ steps: [{ toolCall: { id: `q-${approved}`, name: "question", arguments: { question: "Which color?", options: ["red", "blue"] } } }] }, { steps: [{ text: "ok" }] }]);
        const from = c.frames.length;
        const before = suite.rig.fake.requests.length;
        const rid = c.request({ type: "turn.start", session_id: sid, prompt: "pick" });
        const a: Msg = await c.waitFor((m) => m.type === "approval.requested" && m.request_id === rid, from, "approval.requested");
        assert.equal(a.name, "question");
        assert.equal(a.risk, "read_only");
        assert.equal(a.call_id, `q-${approved}`);
        assert.equal(a.summary, "Question: Which color? Choices: 1) red, 2) blue. Approve to answer in your next message; deny to decline.");
        assert.ok(toolNames(suite.rig.fake.requests[before]!.json).includes("question"));
        c.request({ type: "approval.resolve", session_id: sid, approval_id: a.approval_id, approved });
        const done = await c.waitFor((m) => m.type === "turn.completed" && m.request_id === rid, from, "turn.completed");
        assert.equal(done.type, "turn.completed");
        assert.match(lastToolResult(suite.rig.fake.requests[before + 1]!.json), expect);
        const again = c.request({ type: "approval.resolve", session_id: sid, approval_id: a.approval_id, approved: true });
        const err = await c.waitFor((m) => m.type === "error" && m.request_id === again, from, "approval_not_found");
        assert.equal(err.code, "approval_not_found");
      }
      c.end();
      await c.closed;
    });

    it("is not offered to chat-channel sessions", async () => {
      const c = await suite.t.open();
      const s = await c.open({ channel: "WeChat" });
      const before = suite.rig.fake.requests.length;
      const { terminal } = await c.turn(s.session_id as string, "hello");
      assert.equal(terminal.type, "turn.completed");
      const tools = toolNames(suite.rig.fake.requests[before]!.json);
      assert.ok(tools.includes("read") && !tools.includes("question"), tools.join(","));
      c.end();
      await c.closed;
    });
  });
}
