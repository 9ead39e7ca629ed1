/**
 * The ACP scenario against the loopback fake provider, through the spawned `berth acp` and the SDK client, every
 * frame schema-checked: a streamed answer with a reasoning summary, an edit approved and shown as a diff, a
 * rejected command, a cancellation, then a restart and `session/load` replaying the history before its answer;
 * the session is an ordinary Berth session (app-service `session.list` sees it).
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RequestPermissionRequest, SessionUpdate } from "@agentclientprotocol/sdk";
import { ServiceProcess } from "../helpers/service-process.js";
import { startAcpRig, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
let cwd: string;
let sessionId: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-work-"));
  writeFileSync(join(cwd, "a.txt"), "hello world\n");
});
after(async () => {
  await rig.close();
});

const kinds = (us: SessionUpdate[]) => us.map((u) => u.sessionUpdate);
const text = (us: SessionUpdate[], kind: "agent_message_chunk" | "agent_thought_chunk" | "user_message_chunk") =>
  us.flatMap((u) => (u.sessionUpdate === kind && u.content.type === "text" ? [u.content.text] : [])).join("");

it("runs a session: streamed text and thought, an approved edit shown as a diff, a rejected command, a cancellation", async () => {
  const asked: RequestPermissionRequest[] = [];
  let answer: "allow_once" | "reject_once" = "allow_once";
  const p = rig.spawn({
    cwd,
    client: {
      permission: (req) => {
        asked.push(req);
        return { outcome: { outcome: "selected", optionId: answer } };
      },
    },
  });
  await p.initialize();
  const created = await p.agent.request("session/new", { cwd, mcpServers: [] });
  sessionId = created.sessionId;
  assert.equal(created.modes?.currentModeId, "ask");
  assert.deepEqual(created.configOptions?.map((o) => o.id), ["mode", "model", "reasoning"]);

  // 1. An edit, approved, shown as a diff.
  rig.fake.script([
    { steps: [{ thinking: "I should edit a.txt." }, { text: "Editing now." }, { toolCall: { id: "call-edit", name: "edit", arguments: { path: "a.txt", old_string: "hello", new_string: "goodbye" } } }] },
    { steps: [{ text: "Done." }] },
  ]);
  const r1 = await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "edit a.txt please" }] });
  assert.equal(r1.stopReason, "end_turn");
  assert.equal(readFileSync(join(cwd, "a.txt"), "utf8"), "goodbye world\n");
  const u1 = p.updatesOf(sessionId);
  assert.equal(text(u1, "agent_message_chunk"), "Editing now.Done.");
  assert.equal(text(u1, "agent_thought_chunk"), "I should edit a.txt.");
  const info = u1.find((u) => u.sessionUpdate === "session_info_update");
  assert.ok(info && info.sessionUpdate === "session_info_update" && info.title === "edit a.txt please");
  const usage = u1.filter((u) => u.sessionUpdate === "usage_update");
  assert.ok(usage.length >= 1);
  for (const u of usage) assert.ok(u.sessionUpdate === "usage_update" && u.used > 0 && u.size > 0);
  const call = u1.find((u) => u.sessionUpdate === "tool_call");
  assert.ok(call && call.sessionUpdate === "tool_call");
  assert.equal(call.kind, "edit");
  assert.equal(call.status, "pending");
  assert.deepEqual(call.locations, [{ path: join(cwd, "a.txt") }]);
  const diff = { type: "diff", path: join(cwd, "a.txt"), oldText: "hello", newText: "goodbye" };
  assert.deepEqual(call.content, [diff]);
  assert.equal(asked.length, 1);
  assert.equal(asked[0]!.toolCall.toolCallId, call.toolCallId);
  assert.deepEqual(asked[0]!.options.map((o) => o.kind), ["allow_once", "allow_always", "reject_once", "reject_always"]);
  const statuses = u1.flatMap((u) => (u.sessionUpdate === "tool_call_update" && u.toolCallId === call.toolCallId ? [u.status] : []));
  assert.deepEqual(statuses, ["in_progress", "completed"]);
  const done = u1.findLast((u) => u.sessionUpdate === "tool_call_update");
  assert.ok(done && done.sessionUpdate === "tool_call_update");
  assert.deepEqual(done.content?.[0], diff);

  // 2. A command the user rejects: it never runs, the call ends failed.
  answer = "reject_once";
  const before2 = p.updates.length;
  rig.fake.script([{ steps: [{ toolCall: { id: "call-bash", name: "bash", arguments: { command: "echo hi > b.txt" } } }] }, { steps: [{ text: "Understood." }] }]);
  const r2 = await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "write b.txt" }] });
  assert.equal(r2.stopReason, "end_turn");
  assert.equal(existsSync(join(cwd, "b.txt")), false);
  const u2 = p.updates.slice(before2).map((n) => n.update);
  const bash = u2.find((u) => u.sessionUpdate === "tool_call");
  assert.ok(bash && bash.sessionUpdate === "tool_call" && bash.kind === "execute");
  assert.deepEqual(
    u2.flatMap((u) => (u.sessionUpdate === "tool_call_update" ? [u.status] : [])),
    ["failed"],
  );

  // 3. Cancellation mid-stream: answered `cancelled`, exactly once, with no update of that turn after it.
  const before3 = p.updates.length;
  rig.fake.script([{ steps: [{ text: "Working on it" }, { waitForAbort: true }] }]);
  const slow = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "take your time" }] });
  await p.until(() => p.updates.slice(before3).some((n) => n.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await slow).stopReason, "cancelled");
  const promptIds = p.sent.filter((f) => f["method"] === "session/prompt").map((f) => f["id"]);
  const lastId = promptIds[promptIds.length - 1];
  const answers = p.received.filter((f) => f["id"] === lastId && ("result" in f || "error" in f));
  assert.equal(answers.length, 1);
  const answerAt = p.received.indexOf(answers[0]!);
  assert.equal(p.received.slice(answerAt).filter((f: Frame) => f["method"] === "session/update").length, 0);

  // A prompt while one runs is refused at once.
  rig.fake.script([{ steps: [{ text: "Busy" }, { waitForAbort: true }] }]);
  const running = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "first" }] });
  await p.until(() => p.updates.some((n) => n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text" && n.update.content.text === "Busy"), "Busy");
  await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "second" }] }), (e: { code: number }) => e.code === -32600);
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await running).stopReason, "cancelled");

  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it("after a restart, session/load replays the history before answering, and the session keeps going", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const loaded = await p.agent.request("session/load", { sessionId, cwd, mcpServers: [] });
  assert.equal(loaded.modes?.currentModeId, "ask");
  const loadId = p.sent.find((f) => f["method"] === "session/load")!["id"];
  const answerAt = p.received.findIndex((f) => f["id"] === loadId && "result" in f);
  const replayed = p.received.slice(0, answerAt).filter((f) => f["method"] === "session/update");
  assert.ok(replayed.length > 0);
  assert.equal(p.received.slice(answerAt).filter((f) => f["method"] === "session/update").length, 0);
  const us = p.updatesOf(sessionId);
  assert.equal(text(us, "user_message_chunk"), "edit a.txt pleasewrite b.txttake your timefirst");
  assert.match(text(us, "agent_message_chunk"), /^Editing now\.Done\.Understood\.Working on it/);
  const edit = us.find((u) => u.sessionUpdate === "tool_call" && u.kind === "edit");
  assert.ok(edit && edit.sessionUpdate === "tool_call");
  assert.deepEqual(edit.content, [{ type: "diff", path: join(cwd, "a.txt"), oldText: "hello", newText: "goodbye" }]);
  assert.ok(kinds(us).includes("tool_call_update"));

  const before = p.updates.length;
  const r = await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "still there?" }] });
  assert.equal(r.stopReason, "end_turn");
  assert.equal(text(p.updates.slice(before).map((n) => n.update), "agent_message_chunk"), "echo: still there?");
  const lastRequest = rig.fake.requests[rig.fake.requests.length - 1]!;
  assert.match(lastRequest.body, /edit a\.txt please/);

  const listed = await p.agent.request("session/list", { cwd });
  const mine = listed.sessions.find((x) => x.sessionId === sessionId);
  assert.ok(mine);
  assert.equal(mine.cwd, cwd);
  assert.equal(mine.title, "edit a.txt please");
  assert.deepEqual((await p.agent.request("session/list", { cwd: "/nowhere" })).sessions, []);
  assert.deepEqual(p.invalid, []);
  await p.end();

  const svc = new ServiceProcess({ home: rig.home });
  try {
    await svc.initialize();
    const res = await svc.request("session.list", {});
    assert.ok((res.payload.sessions as Array<{ session_id: string }>).some((x) => x.session_id === sessionId), JSON.stringify(res));
  } finally {
    svc.end();
    await svc.exited;
  }
});

it("cancelling while the client is asked for permission withdraws the question and answers cancelled", async () => {
  const p = rig.spawn({
    cwd,
    client: {
      // An editor that waits for the user: it answers only once Berth withdraws the question.
      permission: () => new Promise(() => undefined),
    },
  });
  await p.initialize();
  const { sessionId: sid } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ toolCall: { id: "call-ask", name: "bash", arguments: { command: "touch never.txt" } } }] }, { steps: [{ text: "unused" }] }]);
  const prompt = p.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "touch it" }] });
  await p.until(() => p.received.some((f) => f["method"] === "session/request_permission"), "the permission request");
  await p.agent.notify("session/cancel", { sessionId: sid });
  assert.equal((await prompt).stopReason, "cancelled");
  const asked = p.received.find((f) => f["method"] === "session/request_permission")!;
  await p.until(() => p.received.some((f) => f["method"] === "$/cancel_request" && f["params"]?.requestId === asked["id"]), "$/cancel_request");
  assert.equal(existsSync(join(cwd, "never.txt")), false);
  const last = p.updatesOf(sid).findLast((u) => u.sessionUpdate === "tool_call_update");
  assert.ok(last && last.sessionUpdate === "tool_call_update" && last.status === "failed");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
