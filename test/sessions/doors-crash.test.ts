/**
 * One session across every door after a kill -9 (docs/sessions.md, "Crash and resume"): a turn of one door is killed
 * while it streams (`berth acp`) or while its tool call waits for approval (`berth stdio`), then the same session is
 * opened through the other doors, each a real process or the daemon's real host and Berth backend in-process: the
 * app-service (list, replay), ACP (`session/list`, `session/load`), `berth chat --session` on a pseudo-terminal, the
 * AHP host (`listSessions`, the chat's turns), SCV (`session.start` with `resume`). Each shows the prompt and the
 * partial answer once, the interrupted turn as not finished in its own terms, and takes the next prompt with the
 * earlier messages (no tool call left without a result). Last, a second door on a session whose turn another door
 * runs: refused with the reason (the app-service's fixed `session_busy`; AHP names the other process), the running
 * turn left alone, the file sound. (SCV's and ACP's refusals of a session another process holds are in
 * `test/scv/hostile.test.ts`, `test/acp/methods.test.ts` and `test/acp/load-after-crash.test.ts`.)
 *
 * `crash-resume.test.ts` covers the single-door cases (stdio killed mid-stream, service killed while a tool runs,
 * torn lines); `test/cli/cross-door.test.ts` one session through every door without a crash.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AcpAgentProcess } from "../acp/harness.js";
import { chatEnv, chatPid, Proc } from "../chat/helpers.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { withBerth } from "../host/berth-rig.js";
import { AhpClient, type Json } from "../host/helpers.js";
import { startRig, spawnStdio, type Rig } from "../scv/client.js";
import { assertSoundFile, closeObserver, conversation, fileRecords, observer, replayAll, until, type Msg } from "./crash-rig.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const NOTE = "[This reply was interrupted before it finished.]";

/** The messages (after the system prompt) of the provider's last request, Chat Completions shape. */
function lastMessages(rig: Rig): Json[] {
  return ((rig.fake.requests.at(-1)!.json as Json).messages as Json[]).filter((m) => m.role !== "system");
}

/** Every assistant tool call of `messages` is answered by the very next tool messages (what real providers demand). */
function assertNoOrphanCalls(messages: Json[]): void {
  messages.forEach((m, i) => {
    const ids = ((m.tool_calls ?? []) as Json[]).map((c) => c.id as string);
    const answered = messages.slice(i + 1, i + 1 + ids.length).map((r) => (r.role === "tool" ? (r.tool_call_id as string) : null));
    assert.deepEqual(answered, ids, `tool calls of message ${i} are answered right after it: ${JSON.stringify(messages)}`);
  });
}

/** An AHP client of the daemon's host with Berth's runtime on `rig`'s home: the session, its chat and the turns. */
async function ahpChat(c: AhpClient, title: string): Promise<{ chat: string; turns: Json[]; item: Json }> {
  const ours = (s: Json): boolean => s.provider === "berth" && s.title === title;
  const listed = ((await c.request("listSessions", {})).result.items as Json[]).find(ours);
  const item = listed ?? ((await c.note("root/sessionAdded", (n) => ours(n.summary as Json), 10_000)).summary as Json);
  const snap = (await c.request("subscribe", { channel: item.resource })).result.snapshot;
  const chat = snap.state.defaultChat as string;
  const turns = (await c.request("subscribe", { channel: chat })).result.snapshot.state.turns as Json[];
  return { chat, turns, item };
}

/** A session file record reduced to what these tests compare. */
const record = (r: Msg): string => (r.kind === "user" ? `user:${r.text}` : r.kind === "terminal" ? `terminal:${r.status}:${r.assistant_text}` : (r.kind as string));

/** An AHP turn reduced as `conversation` reduces replay items. */
const ahpTurn = (t: Json): string[] => [
  `user:${t.message.text}`,
  ...(t.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => `assistant:${p.content}`),
  `state:${t.state}`,
];

test("berth acp killed mid-stream: each other door shows the prompt and the partial answer once, and continues", { timeout: 90_000, skip: hasScript ? false : "util-linux script is not installed" }, async () => {
  const rig = await startRig();
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  rig.fake.script([{ steps: [{ text: "alpha beta gamma ", chunks: 3 }, { hold }, { text: "never sent" }] }]);
  const cwd = mkdtempSync(join(tmpdir(), "doors-cwd-"));
  const a = new AcpAgentProcess({ home: rig.home, cwd });
  try {
    await a.initialize();
    const { sessionId: sid } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    void a.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "first question" }] }).catch(() => undefined);
    await until("the partial answer on disk", () => fileRecords(rig.home, sid).records.some((r) => r.kind === "assistant" && r.text === "alpha beta gamma "));
    a.child.kill("SIGKILL");
    await a.exited;

    // A door that only reads (no lease taken): the turn is shown as it was left, its text once.
    const svc = await observer(rig);
    try {
      const list = await svc.request("session.list", {});
      assert.deepEqual((list.payload.sessions as Msg[]).map((s) => [s.session_id, s.title]), [[sid, "first question"]]);
      assert.deepEqual(conversation((await replayAll(svc, sid)).items), ["user:first question", "assistant:alpha beta gamma "]);
    } finally {
      await closeObserver(svc);
    }
    const b = new AcpAgentProcess({ home: rig.home, cwd });
    try {
      await b.initialize();
      const listed = await b.agent.request("session/list", {});
      assert.deepEqual(listed.sessions.map((s) => [s.sessionId, s.title]), [[sid, "first question"]]);
      // ACP's load closes the turn first (as every door's open does), then shows it ended with the note.
      await b.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
      assert.deepEqual(b.updatesOf(sid), [
        { sessionUpdate: "user_message_chunk", content: { type: "text", text: "first question" } },
        { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "alpha beta gamma " } },
        { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `\n\n${NOTE}` } },
      ]);
      assert.deepEqual(b.invalid, []);
    } finally {
      await b.end();
    }

    // berth chat --session: the history, then a prompt that continues it.
    const env = { ...chatEnv(rig.home, { MC_PROVIDER: "fake", MC_MODEL: "fake-model", BERTH_CHAT_NO_DAEMON: "1" }), TERM: "dumb" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat --session ${sid}`, "/dev/null"], env, cwd);
    try {
      await p.until(/resumed /);
      const history = p.stdout;
      assert.equal(history.match(/alpha beta gamma/g)?.length, 1, `the partial answer once: ${history}`);
      assert.match(history, /you:\s+first question\s+assistant:\s+alpha beta gamma\s+[^\n]*turn failed/, "the turn is shown as not finished");
      const mark = p.stdout.length;
      p.write("second question\r");
      await p.until(/echo: second question[\s\S]*── completed/, mark);
      p.write("\x04"); // Ctrl-D on an empty line ends the chat
      assert.equal(await p.exited, 0);
    } finally {
      const pid = p.child.exitCode === null ? chatPid(p.child.pid!) : null;
      if (pid !== null) process.kill(pid, "SIGKILL");
      p.child.kill("SIGKILL");
      await p.exited;
    }
    assert.deepEqual(lastMessages(rig), [
      { role: "user", content: "first question" },
      { role: "assistant", content: `alpha beta gamma ${NOTE}` },
      { role: "user", content: "second question" },
    ]);

    // The AHP host, which never saw the session: the interrupted turn is not shown as a complete one.
    await withBerth(
      async (w) => {
        const { c } = await AhpClient.init(w.h, ["ahp-root://"]);
        try {
          const { turns } = await ahpChat(c, "first question");
          assert.deepEqual(turns.map(ahpTurn), [
            ["user:first question", "assistant:alpha beta gamma ", "state:cancelled"],
            ["user:second question", "assistant:echo: second question", "state:complete"],
          ]);
          assert.deepEqual(c.invalid, []);
        } finally {
          c.close();
        }
      },
      { berthHome: rig.home, fake: rig.fake },
    );
    assert.deepEqual(
      assertSoundFile(rig.home, sid).map(record),
      ["user:first question", "assistant", "terminal:failed:alpha beta gamma ", "user:second question", "assistant", "terminal:completed:echo: second question"],
      "the interrupted turn closed once, by the first door that took the session",
    );
  } finally {
    release();
    a.child.kill("SIGKILL");
    await rig.fake.close();
  }
});

test("berth stdio killed while its tool call waits for approval: other doors show the call ended, and continue it", { timeout: 90_000 }, async () => {
  const rig = await startRig();
  rig.fake.script([{ steps: [{ text: "Let me check. ", chunks: 2 }, { toolCall: { id: "call_1", name: "bash", arguments: { command: "echo hi" } } }] }]);
  const cwd = mkdtempSync(join(tmpdir(), "doors-cwd-"));
  const a = spawnStdio(rig.env);
  try {
    const sid = (await a.client.open({}, cwd)).session_id as string;
    a.client.request({ type: "turn.start", session_id: sid, prompt: "run it" });
    await a.client.waitFor((f) => f.type === "approval.requested", 0, "the approval request");
    await until("the call on disk", () => fileRecords(rig.home, sid).records.some((r) => r.kind === "tool_call"));
    a.child.kill("SIGKILL");
    await a.exited;

    const b = new AcpAgentProcess({ home: rig.home, cwd });
    try {
      await b.initialize();
      await b.agent.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
      const updates = b.updatesOf(sid);
      assert.deepEqual(updates.map((u) => [u.sessionUpdate, "status" in u ? u.status : "content" in u && u.content !== null && "text" in u.content ? u.content.text : null]), [
        ["user_message_chunk", "run it"],
        ["agent_message_chunk", "Let me check. "],
        ["tool_call", "in_progress"],
        ["tool_call_update", "failed"],
        ["agent_message_chunk", NOTE],
      ]);
    } finally {
      await b.end();
    }

    // The AHP host, after ACP's load closed the turn.
    await withBerth(
      async (w) => {
        const { c } = await AhpClient.init(w.h, ["ahp-root://"]);
        try {
          const { chat, turns } = await ahpChat(c, "run it");
          assert.deepEqual(turns.map(ahpTurn), [["user:run it", "assistant:Let me check. ", "state:cancelled"]]);
          c.dispatch(chat, { type: "chat/turnStarted", turnId: "x1", startedAt: new Date().toISOString(), message: { text: "from ahp", origin: { kind: "user" } } });
          const end = await c.action((e) => ["chat/turnComplete", "chat/turnCancelled", "chat/error"].includes(e.action.type) && e.action.turnId === "x1", "the end of x1", 15_000);
          assert.equal(end.action.type, "chat/turnComplete", JSON.stringify(end.action));
          assert.deepEqual(c.invalid, []);
        } finally {
          c.close();
        }
      },
      { berthHome: rig.home, fake: rig.fake },
    );
    const afterAhp = lastMessages(rig);
    assertNoOrphanCalls(afterAhp);
    assert.deepEqual(afterAhp, [
      { role: "user", content: "run it" },
      { role: "assistant", content: "Let me check. ", tool_calls: [{ id: "call_1", type: "function", function: { name: "bash", arguments: '{"command":"echo hi"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "The tool call did not complete (interrupted)." },
      { role: "assistant", content: NOTE },
      { role: "user", content: "from ahp" },
    ]);

    // SCV: resumed, the next prompt carries all of it.
    const s = spawnStdio(rig.env);
    try {
      await s.client.open({ resume: sid }, cwd);
      assert.equal((await s.client.turn(sid, "and now")).terminal.type, "turn.completed");
    } finally {
      s.client.end();
      await s.exited;
    }
    const afterScv = lastMessages(rig);
    assertNoOrphanCalls(afterScv);
    assert.deepEqual(afterScv.slice(0, 5), afterAhp);
    assert.deepEqual(afterScv.slice(5), [
      { role: "assistant", content: "echo: from ahp" },
      { role: "user", content: "and now" },
    ]);
    assert.deepEqual(
      assertSoundFile(rig.home, sid).map(record),
      ["user:run it", "assistant", "tool_call", "terminal:failed:Let me check. ", "user:from ahp", "assistant", "terminal:completed:echo: from ahp", "user:and now", "assistant", "terminal:completed:echo: and now"],
      "the interrupted turn closed once, by the first door that took the session",
    );
  } finally {
    a.child.kill("SIGKILL");
    await rig.fake.close();
  }
});

test("a second door on a session whose turn another door runs is refused with the reason; the turn ends whole", { timeout: 90_000 }, async () => {
  const rig = await startRig();
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  rig.fake.script([{ steps: [{ text: "first ", chunks: 1 }, { hold }, { text: "done", chunks: 1 }] }]);
  const cwd = mkdtempSync(join(tmpdir(), "doors-cwd-"));
  const a = new AcpAgentProcess({ home: rig.home, cwd });
  let ended = false;
  try {
    await a.initialize();
    const { sessionId: sid } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    const running = a.agent.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "first question" }] });
    await until("the turn streaming", () => fileRecords(rig.home, sid).records.some((r) => r.kind === "assistant"));

    const svc = await observer(rig);
    try {
      for (const [method, payload] of [["session.open", {}], ["turn.start", { prompt: "from the service" }]] as const) {
        const r = await svc.request(method, payload, { session_id: sid });
        assert.equal(r.error?.code, "session_busy", `${method}: ${JSON.stringify(r)}`);
      }
    } finally {
      await closeObserver(svc);
    }
    await withBerth(
      async (w) => {
        const { c } = await AhpClient.init(w.h, ["ahp-root://"]);
        try {
          const { chat, turns } = await ahpChat(c, "first question");
          assert.deepEqual(turns, [], "a turn another process is running is not settled, nor shown as a finished one");
          c.dispatch(chat, { type: "chat/turnStarted", turnId: "x1", startedAt: new Date().toISOString(), message: { text: "from ahp", origin: { kind: "user" } } });
          const end = await c.action((e) => ["chat/turnComplete", "chat/turnCancelled", "chat/error"].includes(e.action.type) && e.action.turnId === "x1", "the end of x1", 15_000);
          assert.equal(end.action.type, "chat/error");
          assert.match(end.action.error.message as string, /another Berth process is running a turn in this session/);
        } finally {
          c.close();
        }
      },
      { berthHome: rig.home, fake: rig.fake },
    );
    release();
    assert.equal((await running).stopReason, "end_turn");
    await a.end();
    ended = true;
    const records = assertSoundFile(rig.home, sid);
    assert.deepEqual(
      records.map(record),
      ["user:first question", "assistant", "assistant", "terminal:completed:first done"],
      "nothing of the refused prompts is stored",
    );
  } finally {
    release();
    if (!ended) a.child.kill("SIGKILL");
    await rig.fake.close();
  }
});
