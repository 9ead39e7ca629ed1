/**
 * `session/load` after the session's writer was killed (kill -9) mid-turn, and while another live process runs a turn
 * (docs/acp.md, "Sessions"; docs/sessions.md, "Crash and resume"). The load closes the turn the dead writer left
 * open (as every door's open does) and replays the partial answer once, followed by the note that says it did not
 * finish; the next prompt's provider request holds the partial answer once, closed by the same note, and no tool call
 * without its result. A load of a session whose turn another live `berth acp` runs is refused with the reason, and
 * that turn is left alone.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AcpRig, withAcpRig } from "./harness.js";
import { assertSoundFile, fileRecords, until, type Msg } from "../sessions/crash-rig.js";

const NOTE = "[This reply was interrupted before it finished.]";

let rig: AcpRig;
withAcpRig((r) => (rig = r), "openai-chat");

type Json = Record<string, any>;

/** The messages (after the system prompt) of the provider's last request, Chat Completions shape. */
function lastMessages(): Json[] {
  return ((rig.fake.requests.at(-1)!.json as Json).messages as Json[]).filter((m) => m.role !== "system");
}

/** A session update reduced to its kind and its text (or status). */
const brief = (u: Json): [string, unknown] => [u.sessionUpdate, "status" in u ? u.status : u.content?.text ?? null];

const record = (r: Msg): string => (r.kind === "user" ? `user:${r.text}` : r.kind === "terminal" ? `terminal:${r.status}:${r.assistant_text}` : (r.kind as string));

it("berth acp killed mid-answer: a load shows the partial answer once, then the note; the next prompt continues it", { timeout: 60_000 }, async () => {
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  rig.fake.script([{ steps: [{ text: "alpha beta gamma ", chunks: 3 }, { hold }, { text: "never sent" }] }]);
  const cwd = mkdtempSync(join(tmpdir(), "acp-crash-cwd-"));
  const a = rig.spawn({ cwd });
  try {
    await a.initialize();
    const { sessionId: sid } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    void a.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "first question" }] }).catch(() => undefined);
    await until("the partial answer on disk", () => fileRecords(rig.home, sid).records.some((r) => r.kind === "assistant" && r.text === "alpha beta gamma "));
    a.child.kill("SIGKILL");
    await a.exited;

    const b = rig.spawn({ cwd });
    await b.initialize();
    await b.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
    assert.deepEqual(b.updatesOf(sid), [
      { sessionUpdate: "user_message_chunk", content: { type: "text", text: "first question" } },
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "alpha beta gamma " } },
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `\n\n${NOTE}` } },
    ]);
    // The load closed the turn (every other door now sees it ended), once.
    assert.deepEqual(assertSoundFile(rig.home, sid).map(record), ["user:first question", "assistant", "terminal:failed:alpha beta gamma "]);

    const n = b.updatesOf(sid).length;
    assert.equal((await b.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "second question" }] })).stopReason, "end_turn");
    const live = b.updatesOf(sid).slice(n).filter((u) => u.sessionUpdate === "agent_message_chunk");
    assert.equal(live.map((u) => brief(u)[1]).join(""), "echo: second question", "the answer, nothing replayed again");
    assert.deepEqual(lastMessages(), [
      { role: "user", content: "first question" },
      { role: "assistant", content: `alpha beta gamma ${NOTE}` },
      { role: "user", content: "second question" },
    ]);
    await b.end();

    // Loaded again (the turn already settled): the same conversation, the partial answer and the note once each.
    const c = rig.spawn({ cwd });
    await c.initialize();
    await c.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
    assert.deepEqual(c.updatesOf(sid).map(brief), [
      ["user_message_chunk", "first question"],
      ["agent_message_chunk", "alpha beta gamma "],
      ["agent_message_chunk", `\n\n${NOTE}`],
      ["user_message_chunk", "second question"],
      ["agent_message_chunk", "echo: second question"],
    ]);
    assert.deepEqual([...b.invalid, ...c.invalid], []);
    await c.end();
    assert.deepEqual(
      assertSoundFile(rig.home, sid).map(record),
      ["user:first question", "assistant", "terminal:failed:alpha beta gamma ", "user:second question", "assistant", "terminal:completed:echo: second question"],
      "the interrupted turn closed once",
    );
  } finally {
    release();
  }
});

it("berth acp killed while its tool call waits for approval: a load shows the call failed and the note; the next request has no orphan call", { timeout: 60_000 }, async () => {
  rig.fake.script([{ steps: [{ text: "Let me check. ", chunks: 2 }, { toolCall: { id: "call_1", name: "bash", arguments: { command: "echo hi" } } }] }]);
  const cwd = mkdtempSync(join(tmpdir(), "acp-crash-cwd-"));
  const a = rig.spawn({ cwd, client: { permission: () => new Promise(() => undefined) } });
  await a.initialize();
  const { sessionId: sid } = await a.agent.request("session/new", { cwd, mcpServers: [] });
  await a.agent.request("session/set_mode", { sessionId: sid, modeId: "ask-all" });
  void a.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "run it" }] }).catch(() => undefined);
  await a.until(() => a.received.some((f) => f.method === "session/request_permission"), "the approval request");
  await until("the call on disk", () => fileRecords(rig.home, sid).records.some((r) => r.kind === "tool_call"));
  a.child.kill("SIGKILL");
  await a.exited;

  const b = rig.spawn({ cwd });
  await b.initialize();
  await b.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
  assert.deepEqual(b.updatesOf(sid).map(brief), [
    ["user_message_chunk", "run it"],
    ["agent_message_chunk", "Let me check. "],
    ["tool_call", "in_progress"],
    ["tool_call_update", "failed"],
    ["agent_message_chunk", NOTE],
  ]);
  assert.equal((await b.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "and now" }] })).stopReason, "end_turn");
  assert.deepEqual(lastMessages(), [
    { role: "user", content: "run it" },
    { role: "assistant", content: "Let me check. ", tool_calls: [{ id: "call_1", type: "function", function: { name: "bash", arguments: '{"command":"echo hi"}' } }] },
    { role: "tool", tool_call_id: "call_1", content: "The tool call did not complete (interrupted)." },
    { role: "assistant", content: NOTE },
    { role: "user", content: "and now" },
  ]);
  assert.deepEqual(b.invalid, []);
  await b.end();
  assert.deepEqual(assertSoundFile(rig.home, sid).map(record), [
    "user:run it",
    "assistant",
    "tool_call",
    "terminal:failed:Let me check. ",
    "user:and now",
    "assistant",
    "terminal:completed:echo: and now",
  ]);
});

it("session/load of a session whose turn another live berth acp runs is -32600 naming it; that turn ends whole", { timeout: 60_000 }, async () => {
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  rig.fake.script([{ steps: [{ text: "first ", chunks: 1 }, { hold }, { text: "done", chunks: 1 }] }]);
  const cwd = mkdtempSync(join(tmpdir(), "acp-crash-cwd-"));
  const a = rig.spawn({ cwd });
  const b = rig.spawn({ cwd });
  try {
    await a.initialize();
    await b.initialize();
    const { sessionId: sid } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    const running = a.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "first question" }] });
    await until("the turn streaming", () => fileRecords(rig.home, sid).records.some((r) => r.kind === "assistant"));

    await assert.rejects(b.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] }), (e: { code: number; message: string }) => {
      assert.equal(e.code, -32600);
      assert.equal(
        e.message,
        "Invalid request: another Berth process is running a turn in this session (it holds the session's writer lease), and a replay now would show its answer unfinished; wait for that turn to end and send session/load again",
      );
      return true;
    });
    assert.deepEqual(b.updatesOf(sid), [], "nothing of the running turn is replayed");
    await assert.rejects(b.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "me too" }] }), (e: { code: number }) => e.code === -32002);
    // A resume replays nothing: it is taken, and its prompt is refused while the other process runs the turn.
    await b.agent.request("session/resume", { sessionId: sid, cwd });
    await assert.rejects(
      b.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "me too" }] }),
      (e: { code: number; message: string }) => e.code === -32600 && /another Berth process is running a turn/.test(e.message),
    );

    release();
    assert.equal((await running).stopReason, "end_turn");
    assert.deepEqual(assertSoundFile(rig.home, sid).map(record), ["user:first question", "assistant", "assistant", "terminal:completed:first done"]);
    // Once that turn ended, the load replays it whole, with no note.
    await b.agent.request("session/close", { sessionId: sid });
    await b.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
    assert.deepEqual(b.updatesOf(sid).map(brief), [
      ["user_message_chunk", "first question"],
      ["agent_message_chunk", "first "],
      ["agent_message_chunk", "done"],
    ]);
    assert.deepEqual([...a.invalid, ...b.invalid], []);
  } finally {
    release();
    await a.end();
    await b.end();
  }
});
