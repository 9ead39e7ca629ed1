/**
 * Permission questions racing a cancellation, through the spawned `berth acp`: a question Berth withdrew
 * (`$/cancel_request` after `session/cancel`) is over; an answer the client sends to it anyway changes nothing; a
 * question withdrawn before it was written is never written.
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

it("a cancel that lands while the question waits for earlier updates to be written: no question goes out, the tool never runs", { timeout: 60_000 }, async () => {
  // The interleaving, driven through the real pipe. The client stops reading stdout as the first write's tool_call
  // starts arriving; the four writes' updates (each call's arguments are shown twice, as raw input and as a diff,
  // ~120 KiB, and its diff again when it completes) are far more than the pipe and this end's buffers hold, so nothing
  // queued after that tool_call can be written. The bash call's question then waits for those updates; Berth marks
  // that wait on stderr (BERTH_DEBUG_TIMING), the client cancels, and reads on once Berth marked the question withdrawn.
  const dir = mkdtempSync(join(tmpdir(), "berth-acp-held-"));
  const p: AcpAgentProcess = rig.spawn({ cwd: dir, env: { BERTH_DEBUG_TIMING: "1" } });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: dir, mcpServers: [] });
  await p.agent.request("session/set_mode", { sessionId, modeId: "auto-edit" }); // the writes run unasked; bash asks
  // Each write's arguments just under the 64 KiB a tool call's shown arguments are bounded to.
  const writes = [1, 2, 3, 4].map((i) => ({ toolCall: { id: `write-${i}`, name: "write", arguments: { path: `big-${i}.txt`, content: "x".repeat(60 * 1024) } } }));
  rig.fake.script([{ steps: [...writes, { toolCall: { id: "held-bash", name: "bash", arguments: { command: "touch ran.txt" } } }] }]);
  p.holdOutputAt((start) => start.includes('"tool_call"') && start.includes('"write-1"'));
  const turn = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "write, then touch" }] });
  await p.until(() => p.held && p.stderr.includes(" acp.permission_waits_for_updates"), "the question waiting for the held updates");
  await p.agent.notify("session/cancel", { sessionId });
  await p.until(() => p.stderr.includes(" acp.permission_withdrawn"), "the question withdrawn");
  p.releaseOutput();
  assert.equal((await turn).stopReason, "cancelled");
  // A later turn's answer comes after anything Berth wrote before it: a late question would be in `received` by now.
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "after" }] })).stopReason, "end_turn");
  assert.deepEqual(
    p.received.filter((f) => f["method"] === "session/request_permission" || f["method"] === "$/cancel_request").map((f) => f["method"]),
    [],
    "no question (and so no withdrawal of one) was written",
  );
  assert.equal(existsSync(join(dir, "big-4.txt")), true, "the writes ran before the cancel");
  assert.equal(existsSync(join(dir, "ran.txt")), false, "the bash call never ran");
  const last = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "held-bash");
  assert.ok(last?.sessionUpdate === "tool_call_update" && last.status === "failed", JSON.stringify(last));
  assert.deepEqual(p.invalid, []);
  await p.end();
});
