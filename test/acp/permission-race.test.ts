/**
 * Permission questions racing a cancellation, through the spawned `berth acp`: a question Berth withdrew
 * (`$/cancel_request` after `session/cancel`) is over; an answer the client sends to it anyway changes nothing.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RequestPermissionRequest, RequestPermissionResponse } from "@agentclientprotocol/sdk";
import { startAcpRig, type AcpAgentProcess, type AcpRig } from "./harness.js";

let rig: AcpRig;
let cwd: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-race-"));
});
after(async () => {
  await rig.close();
});

it("an 'always allow' sent for a withdrawn question is not remembered: the next call asks again", { timeout: 60_000 }, async () => {
  const asked: RequestPermissionRequest[] = [];
  const permission = async (params: RequestPermissionRequest): Promise<RequestPermissionResponse> => {
    asked.push(params);
    if (asked.length > 1) return { outcome: { outcome: "selected", optionId: "reject_once" } };
    // A slow editor: the user clicks "Always allow" only after Berth has withdrawn the question.
    const q = p.received.find((f) => f["method"] === "session/request_permission" && f["params"]?.toolCall?.toolCallId === params.toolCall.toolCallId)!;
    await p.until(() => p.received.some((f) => f["method"] === "$/cancel_request" && f["params"]?.requestId === q["id"]), "the question withdrawn");
    return { outcome: { outcome: "selected", optionId: "allow_always" } };
  };
  const p: AcpAgentProcess = rig.spawn({ cwd, client: { permission } });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ toolCall: { id: "late-1", name: "bash", arguments: { command: "touch first.txt" } } }] }, { steps: [{ text: "unused" }] }]);
  const first = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "touch first" }] });
  await p.until(() => p.received.some((f) => f["method"] === "session/request_permission"), "the first question");
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await first).stopReason, "cancelled");
  // The late answer went out before the next prompt, so Berth reads it first.
  await p.until(() => p.sent.some((f) => f["result"]?.outcome?.optionId === "allow_always"), "the late answer sent");
  rig.fake.unscript();

  rig.fake.script([{ steps: [{ toolCall: { id: "late-2", name: "bash", arguments: { command: "touch second.txt" } } }] }, { steps: [{ text: "denied" }] }]);
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "touch second" }] })).stopReason, "end_turn");
  assert.equal(asked.length, 2, "the second bash call was asked about");
  assert.equal(existsSync(join(cwd, "first.txt")), false);
  assert.equal(existsSync(join(cwd, "second.txt")), false);
  const last = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "late-2");
  assert.ok(last?.sessionUpdate === "tool_call_update" && last.status === "failed");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
