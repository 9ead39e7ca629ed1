/**
 * An editor that holds stdout open without reading it while a turn makes many tool calls: the updates Berth cannot
 * write yet do not pile up one per event. Once the editor reads again it gets one frame per call for the calls that
 * waited (its final state: `completed`, with its output), not the `tool_call` / `in_progress` / `completed` triple
 * of each, so what waits in memory is bounded by the calls themselves, not by every status change.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import type { FakeTurn } from "../fakes/fake-provider.js";
import { COALESCE_AFTER, UpdateQueue } from "../../src/protocols/acp/update-queue.js";
import { fakeSettings } from "../turns/helpers.js";
import { startAcpRig, type AcpRig } from "./harness.js";

let rig: AcpRig;
before(async () => {
  rig = await startAcpRig();
  writeFileSync(join(rig.home, "settings.json"), JSON.stringify(fakeSettings(rig.fake.baseUrl, { api: "openai-responses", contextWindow: 10_000_000 })));
});
after(async () => {
  await rig.close();
});

it("tool call updates an editor does not read are coalesced to each call's final state", { timeout: 60_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-unread-"));
  writeFileSync(join(cwd, "a.txt"), "alpha\n");
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  // The first calls' frames (~2 MiB) are more than the socket pair and the client's read buffer hold together: once
  // the client stops reading at them, their writes cannot finish, and everything after them waits in Berth. (A model
  // window large enough for them, so they are not compacted away.)
  const steps = 4;
  const per = 32;
  // (Each under the 64 KiB bound on the arguments a tool call shows.)
  const pad = "x".repeat(60 * 1024);
  // (Two responses of 16: one would pass the 4 MiB bound on a provider response.)
  const held = (from: number): FakeTurn => ({ steps: Array.from({ length: 16 }, (_, i) => ({ toolCall: { id: `held${from + i}`, name: "ls", arguments: { path: ".", pad } } })) });
  const turns: FakeTurn[] = [held(0), held(16)];
  for (let s = 0; s < steps; s++) turns.push({ steps: Array.from({ length: per }, (_, i) => ({ toolCall: { id: `c${s}-${i}`, name: "read", arguments: { path: "a.txt" } } })) });
  turns.push({ steps: [{ text: "done" }] });
  const posts = (): number => rig.fake.requests.filter((r) => r.method === "POST").length;
  const before = posts();
  rig.fake.script(turns);
  p.holdOutputAt((start) => start.includes('"tool_call"') && start.includes('"held0"'));
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "read a lot" }] });
  await p.until(() => p.held, "the client stopped reading at the first call");
  // The last provider request is made once every call before it completed: all their updates are queued by now.
  while (posts() < before + turns.length) await rig.fake.waitForRequests(rig.fake.requests.length + 1);
  p.releaseOutput();
  assert.equal((await prompt).stopReason, "end_turn");
  const calls = steps * per;
  const ups = p.updatesOf(sessionId).filter((u): u is SessionUpdate & { toolCallId: string } => "toolCallId" in u && !u.toolCallId.startsWith("held"));
  // Each call's first frame announces it, and its last one is its final state.
  for (let s = 0; s < steps; s++)
    for (let i = 0; i < per; i++) {
      const mine = ups.filter((u) => u.toolCallId === `c${s}-${i}`);
      assert.equal(mine[0]?.sessionUpdate, "tool_call", `c${s}-${i} is announced first`);
      const last = Object.assign({}, ...mine) as Record<string, unknown>;
      assert.equal(last["status"], "completed", `c${s}-${i} ends completed`);
      assert.match(JSON.stringify(last["content"]), /alpha/, `c${s}-${i} shows its output`);
    }
  // Uncoalesced, each call costs three frames; only the first few queued ones may stay uncoalesced.
  assert.ok(ups.length <= calls + COALESCE_AFTER, `${ups.length} frames for ${calls} calls`);
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it("the queue writes in order, folds only while backed up, and never changes an update being written", async () => {
  const written: SessionUpdate[] = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const q = new UpdateQueue(async (u) => {
    written.push(structuredClone(u));
    if (written.length === 1) await gate;
  });
  const call = (id: string): SessionUpdate => ({ sessionUpdate: "tool_call", toolCallId: id, title: id, status: "pending" });
  const done = q.push(call("first"));
  // Being written: a later update of the same call is queued behind it, not folded into it.
  void q.push({ sessionUpdate: "tool_call_update", toolCallId: "first", status: "completed" });
  for (let i = 0; i < COALESCE_AFTER; i++) void q.push(call(`c${i}`));
  assert.equal(q.size, COALESCE_AFTER + 1);
  void q.push({ sessionUpdate: "tool_call_update", toolCallId: "c0", status: "in_progress" });
  void q.push({ sessionUpdate: "tool_call_update", toolCallId: "c0", status: "completed", content: [{ type: "content", content: { type: "text", text: "out" } }] });
  void q.push({ sessionUpdate: "usage_update", used: 1, size: 10 });
  void q.push({ sessionUpdate: "usage_update", used: 2, size: 10 });
  void q.push({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "a" } });
  void q.push({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "b" } });
  assert.equal(q.size, COALESCE_AFTER + 3);
  const all = q.flush();
  open();
  await Promise.all([done, all]);
  assert.deepEqual(written.slice(0, 3), [
    call("first"),
    { sessionUpdate: "tool_call_update", toolCallId: "first", status: "completed" },
    { ...call("c0"), status: "completed", content: [{ type: "content", content: { type: "text", text: "out" } }] },
  ]);
  assert.deepEqual(written.slice(-2), [
    { sessionUpdate: "usage_update", used: 2, size: 10 },
    { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "ab" } },
  ]);
  assert.equal(written.length, COALESCE_AFTER + 4);
});
