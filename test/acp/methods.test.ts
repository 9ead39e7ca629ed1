/**
 * The remaining ACP methods through the spawned `berth acp`, every frame schema-checked: session/resume and
 * session/close, modes and config options, unknown sessions and relative paths, auth-required, rich prompt
 * content, and the client's MCP servers attached to the session.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { SessionConfigOption } from "@agentclientprotocol/sdk";
import { LIST_PAGE_SIZE } from "../../src/protocols/acp/list.js";
import { fakeSettings } from "../turns/helpers.js";
import { startAcpRig, AcpAgentProcess, type AcpRig } from "./harness.js";

const MCP_FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));
const code = (n: number) => (e: { code?: number }) => e.code === n;
/** ACP's unknown-session error: `-32002` naming the requested session in `data.sessionId` (SessionNotFoundErrorData). */
const notFound = (sessionId: string) => (e: { code?: number; data?: unknown }) => {
  assert.equal(e.code, -32002);
  assert.deepEqual(e.data, { sessionId });
  return true;
};

let rig: AcpRig;
let cwd: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-work-"));
});
after(async () => {
  await rig.close();
});

const current = (opts: SessionConfigOption[] | null | undefined, id: string) => opts?.find((o) => o.id === id)?.currentValue;

it("refuses relative cwds, unknown sessions and bad cursors with the ACP codes", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  await assert.rejects(p.agent.request("session/new", { cwd: "relative/dir", mcpServers: [] }), code(-32602));
  // A directory that is not there (a session in it would fail every tool call), or a file: named, never the path.
  const file = join(cwd, "a-file");
  writeFileSync(file, "x");
  for (const [where, why] of [
    [join(cwd, "no-such-dir"), "cwd does not exist"],
    [file, "cwd is not a directory"],
  ] as const) {
    for (const [method, extra] of [
      ["session/new", { mcpServers: [] }],
      ["session/load", { sessionId: "no-such-session", mcpServers: [] }],
      ["session/resume", { sessionId: "no-such-session" }],
    ] as const) {
      await assert.rejects(p.agent.request(method, { cwd: where, ...extra }), (e: { code?: number; message?: string }) => {
        assert.equal(e.code, -32602, method);
        assert.equal(e.message, `Invalid params: ${why}; give the absolute path of an existing directory`);
        return true;
      });
    }
  }
  await assert.rejects(p.agent.request("session/prompt", { sessionId: "nope", prompt: [{ type: "text", text: "hi" }] }), notFound("nope"));
  await assert.rejects(p.agent.request("session/load", { sessionId: "no-such-session", cwd, mcpServers: [] }), notFound("no-such-session"));
  await assert.rejects(p.agent.request("session/resume", { sessionId: "no-such-session", cwd }), notFound("no-such-session"));
  // The SDK client reports -32002 on session/close as success; the raw frame shows the error.
  await p.agent.request("session/close", { sessionId: "nope" });
  const closeId = p.sent.findLast((f) => f["method"] === "session/close")!["id"];
  assert.ok(notFound("nope")(p.received.find((f) => f["id"] === closeId)?.["error"] as { code?: number; data?: unknown }));
  await assert.rejects(p.agent.request("session/set_mode", { sessionId: "nope", modeId: "full" }), notFound("nope"));
  await assert.rejects(p.agent.request("session/set_config_option", { sessionId: "nope", configId: "mode", value: "full" }), notFound("nope"));
  await assert.rejects(p.agent.request("session/list", { cursor: "garbage!" }), code(-32602));
  await assert.rejects(p.agent.request("session/list", { cwd: "rel" }), code(-32602));
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("resume reattaches without replay; close forgets the session but keeps its history", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "one" }] })).stopReason, "end_turn");
  assert.deepEqual(await p.agent.request("session/close", { sessionId }), {});
  await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "x" }] }), notFound(sessionId));
  const before = p.updates.length;
  const resumed = await p.agent.request("session/resume", { sessionId, cwd });
  assert.equal(resumed.modes?.currentModeId, "ask");
  assert.equal(p.updates.length, before, "resume sends no replay");
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "two" }] })).stopReason, "end_turn");
  assert.match(rig.fake.requests[rig.fake.requests.length - 1]!.body, /one/);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a session store that refuses writes answers session/new with -32603 naming the cause and fix", async () => {
  const p = rig.spawn({ cwd, fileSizeLimit: 0 });
  await p.initialize();
  await assert.rejects(p.agent.request("session/new", { cwd, mcpServers: [] }), (e: { code?: number; message?: string }) => {
    assert.equal(e.code, -32603);
    assert.match(String(e.message), /^Internal error: Berth's session store is unavailable: .*\(EFBIG\); raise it \(ulimit -f\) and retry$/);
    return true;
  });
  await p.end();
  assert.match(p.stderr, /berth acp: cannot create a session \(.*\(EFBIG\)/);
});

it("a failed turn answers session/prompt with -32603 naming its code, cause and fix; the session takes the next prompt", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([
    { body: "<html><body>Open WebUI</body></html>", headers: { "content-type": "text/html" } },
    // Refused as over the window; so is the summary request of the compaction that follows (the real window is
    // smaller than the one Berth knows), and the turn fails with the refusal.
    ...Array(2).fill({ status: 400, body: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 9000 tokens > 8192 maximum" } }) }),
  ]);
  await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "one" }] }), (e: { code?: number; message?: string }) => {
    assert.equal(e.code, -32603);
    assert.match(String(e.message), /^the turn failed \(provider_error\): the provider request failed: provider did not answer with an event stream \(HTML page\); check the provider's base_url in settings\.json/);
    return true;
  });
  await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "two" }] }), (e: { message?: string }) => {
    assert.match(String(e.message), /^the turn failed \(context_limit\): the provider refused the request as longer than the model's context window .*set this model's context_window in settings\.json/);
    return true;
  });
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "three" }] })).stopReason, "end_turn");
  assert.doesNotMatch(p.stderr, /Internal error|\n\s+at /);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("modes and config options: full mode runs commands without asking; model and reasoning reach the provider", async () => {
  let asked = 0;
  const p = rig.spawn({ cwd, client: { permission: () => ((asked += 1), { outcome: { outcome: "cancelled" } }) } });
  await p.initialize();
  const s = await p.agent.request("session/new", { cwd, mcpServers: [] });
  const sessionId = s.sessionId;
  assert.deepEqual(s.modes?.availableModes.map((m) => m.id), ["ask-all", "ask", "auto-edit", "full"]);
  assert.equal(current(s.configOptions, "model"), "fake-model");
  assert.equal(current(s.configOptions, "reasoning"), "default");

  await assert.rejects(p.agent.request("session/set_mode", { sessionId, modeId: "yolo" }), code(-32602));
  assert.deepEqual(await p.agent.request("session/set_mode", { sessionId, modeId: "full" }), {});
  rig.fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: "echo ran > ran.txt" } } }] }, { steps: [{ text: "ok" }] }]);
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "run" }] })).stopReason, "end_turn");
  assert.equal(asked, 0);
  const ran = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update");
  assert.ok(ran && ran.sessionUpdate === "tool_call_update" && ran.status === "completed");

  await assert.rejects(p.agent.request("session/set_config_option", { sessionId, configId: "reasoning", value: "extreme" }), code(-32602));
  await assert.rejects(p.agent.request("session/set_config_option", { sessionId, configId: "model", value: "not-a-model" }), code(-32602));
  const set = await p.agent.request("session/set_config_option", { sessionId, configId: "reasoning", value: "high" });
  assert.equal(current(set.configOptions, "reasoning"), "high");
  const back = await p.agent.request("session/set_config_option", { sessionId, configId: "mode", value: "ask" });
  assert.equal(current(back.configOptions, "mode"), "ask");
  const n = rig.fake.requests.length;
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "think hard" }] })).stopReason, "end_turn");
  const body = rig.fake.requests[n]!.json as { reasoning?: { effort?: string } };
  assert.equal(body.reasoning?.effort, "high");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("takes text, resource links, embedded resources and images in one prompt", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  const n = rig.fake.requests.length;
  const r = await p.agent.request("session/prompt", {
    sessionId,
    prompt: [
      { type: "text", text: "compare" },
      { type: "resource_link", name: "x.ts", uri: `file://${cwd}/x.ts` },
      { type: "resource", resource: { uri: `file://${cwd}/y.ts`, text: "EMBEDDED-Y" } },
      { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
    ],
  });
  assert.equal(r.stopReason, "end_turn");
  const body = rig.fake.requests[n]!.body;
  assert.match(body, /compare/);
  assert.match(body, new RegExp(`linked resource: x\\.ts ${cwd}/x\\.ts`));
  assert.match(body, /EMBEDDED-Y/);
  await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [{ type: "audio", mimeType: "audio/wav", data: "AA==" }] }), code(-32602));
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("attaches the client's stdio MCP servers to the session", async () => {
  // The server's tools must be in the first request even where it takes longer than the default 5 s to start.
  const p = rig.spawn({ cwd, env: { BERTH_MCP_STARTUP_WAIT_MS: "600000" } });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", {
    cwd,
    mcpServers: [{ name: "editor", command: process.execPath, args: [MCP_FIXTURE], env: [] }],
  });
  await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
  const n = rig.fake.requests.length;
  rig.fake.script([{ steps: [{ toolCall: { id: "m1", name: "mcp__editor__echo", arguments: { text: "from-editor" } } }] }, { steps: [{ text: "ok" }] }]);
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "use it" }] })).stopReason, "end_turn");
  assert.match(rig.fake.requests[n]!.body, /mcp__editor__echo/);
  const done = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update");
  assert.ok(done && done.sessionUpdate === "tool_call_update");
  assert.equal(done.status, "completed");
  assert.deepEqual(done.content, [{ type: "content", content: { type: "text", text: "echo: from-editor" } }]);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a session starts in the mode of settings' approval_policy; a project's file may only make it stricter", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-acp-policy-"));
  const settings = (policy: string): void => writeFileSync(join(home, "settings.json"), JSON.stringify({ ...fakeSettings(rig.fake.baseUrl, { api: "openai-responses" }), approval_policy: policy }));
  const repo = mkdtempSync(join(tmpdir(), "berth-acp-repo-"));
  mkdirSync(join(repo, ".berth"), { mode: 0o700 });
  let asked: string[] = [];
  const p = new AcpAgentProcess({ home, cwd, client: { permission: (r) => ((asked = [...asked, String(r.toolCall.title)]), { outcome: { outcome: "selected", optionId: r.options[0]!.optionId } }) } });
  try {
    await p.initialize();
    // The global "always": a read asks too.
    settings("always");
    const all = await p.agent.request("session/new", { cwd, mcpServers: [] });
    assert.equal(all.modes?.currentModeId, "ask-all");
    assert.equal(current(all.configOptions, "mode"), "ask-all");
    rig.fake.script([{ steps: [{ toolCall: { id: "l1", name: "ls", arguments: {} } }] }, { steps: [{ text: "listed" }] }]);
    assert.equal((await p.agent.request("session/prompt", { sessionId: all.sessionId, prompt: [{ type: "text", text: "list" }] })).stopReason, "end_turn");
    assert.equal(asked.length, 1, "ls ran without asking under always");
    // The global "never": full access, bash runs unasked.
    settings("never");
    const full = await p.agent.request("session/new", { cwd, mcpServers: [] });
    assert.equal(full.modes?.currentModeId, "full");
    rig.fake.script([{ steps: [{ toolCall: { id: "b1", name: "bash", arguments: { command: "echo ran > policy.txt" } } }] }, { steps: [{ text: "ok" }] }]);
    assert.equal((await p.agent.request("session/prompt", { sessionId: full.sessionId, prompt: [{ type: "text", text: "run" }] })).stopReason, "end_turn");
    assert.equal(asked.length, 1);
    assert.equal(readFileSync(join(cwd, "policy.txt"), "utf8"), "ran\n");
    // A repository saying "never" under the global "on-risk": still "ask", and stderr says why; saying "always"
    // under the global "never": "ask-all".
    settings("on-risk");
    writeFileSync(join(repo, ".berth", "settings.json"), JSON.stringify({ approval_policy: "never" }));
    assert.equal((await p.agent.request("session/new", { cwd: repo, mcpServers: [] })).modes?.currentModeId, "ask");
    assert.ok(p.stderr.includes(`berth acp: ignoring approval_policy "never" in ${join(repo, ".berth", "settings.json")}: a project's settings may only make approvals stricter (using "on-risk")`), p.stderr);
    settings("never");
    writeFileSync(join(repo, ".berth", "settings.json"), JSON.stringify({ approval_policy: "always" }));
    assert.equal((await p.agent.request("session/new", { cwd: repo, mcpServers: [] })).modes?.currentModeId, "ask-all");
    assert.deepEqual(p.invalid, []);
  } finally {
    await p.end();
  }
});

it("session/new without credentials for the selected provider is -32000 (auth required)", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-acp-noauth-"));
  mkdirSync(home, { recursive: true });
  writeFileSync(join(home, "settings.json"), JSON.stringify({ provider: "anthropic", model: "claude-sonnet-4-5" }));
  const p = new AcpAgentProcess({ home, cwd });
  try {
    await p.initialize();
    await assert.rejects(p.agent.request("session/new", { cwd, mcpServers: [] }), code(-32000));
    assert.deepEqual(p.invalid, []);
  } finally {
    await p.end();
  }
});

it("a prompt on a session another berth acp is running a turn in is refused with -32600, naming the other process", async () => {
  const p1 = rig.spawn({ cwd });
  const p2 = rig.spawn({ cwd });
  try {
    await p1.initialize();
    await p2.initialize();
    const { sessionId } = await p1.agent.request("session/new", { cwd, mcpServers: [] });
    rig.fake.script([{ steps: [{ text: "Holding" }, { waitForAbort: true }] }]);
    const running = p1.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hold" }] });
    await p1.until(() => p1.updates.some((n) => n.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
    await p2.agent.request("session/resume", { sessionId, cwd });
    await assert.rejects(
      p2.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "me too" }] }),
      (e: { code: number; message: string }) => e.code === -32600 && /another Berth process/.test(e.message),
    );
    await p1.agent.notify("session/cancel", { sessionId });
    assert.equal((await running).stopReason, "cancelled");
    assert.deepEqual([...p1.invalid, ...p2.invalid], []);
  } finally {
    await p1.end();
    await p2.end();
  }
});

it("the editor closing stdin mid-turn cancels the turn: provider socket closed, exit 0, partial answer kept", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "Partial answer" }, { waitForAbort: true }] }]);
  const n = rig.fake.requests.length;
  void p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "long job" }] }).catch(() => undefined);
  await p.until(() => p.updates.some((u) => u.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
  const req = rig.fake.requests[n]!;
  assert.deepEqual(await p.end(), { code: 0, signal: null });
  await req.socketClosed;

  const q = rig.spawn({ cwd });
  await q.initialize();
  await q.agent.request("session/load", { sessionId, cwd, mcpServers: [] });
  const replayed = q.updatesOf(sessionId);
  assert.ok(replayed.some((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" && u.content.text === "Partial answer"));
  assert.deepEqual(q.invalid, []);
  await q.end();
});

it("session/list pages 50 at a time: exactly 50 has no cursor, 51 continues on a second page", async () => {
  const own = await startAcpRig();
  try {
    const p = own.spawn({ cwd });
    await p.initialize();
    const ids: string[] = [];
    for (let i = 0; i < LIST_PAGE_SIZE; i++) ids.push((await p.agent.request("session/new", { cwd, mcpServers: [] })).sessionId);
    const full = await p.agent.request("session/list", {});
    assert.equal(full.sessions.length, LIST_PAGE_SIZE);
    assert.equal(full.nextCursor ?? null, null);
    ids.push((await p.agent.request("session/new", { cwd, mcpServers: [] })).sessionId);
    const first = await p.agent.request("session/list", {});
    assert.equal(first.sessions.length, LIST_PAGE_SIZE);
    assert.equal(typeof first.nextCursor, "string");
    const second = await p.agent.request("session/list", { cursor: first.nextCursor! });
    assert.equal(second.sessions.length, 1);
    assert.equal(second.nextCursor ?? null, null);
    assert.deepEqual([...first.sessions, ...second.sessions].map((s) => s.sessionId).sort(), [...ids].sort());
    assert.deepEqual(p.invalid, []);
    await p.end();
  } finally {
    await own.close();
  }
});

it("the model config option lists the provider's models and switches this session's model only", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-acp-models-"));
  const settings = fakeSettings(rig.fake.baseUrl, { api: "openai-responses" }) as { providers: Record<string, { models: Array<{ id: string }> }> };
  settings.providers["fake"]!.models.push({ id: "fake-model-2" });
  writeFileSync(join(home, "settings.json"), JSON.stringify(settings));
  const p = new AcpAgentProcess({ home, cwd });
  try {
    await p.initialize();
    const a = await p.agent.request("session/new", { cwd, mcpServers: [] });
    const b = await p.agent.request("session/new", { cwd, mcpServers: [] });
    const model = a.configOptions?.find((o) => o.id === "model");
    assert.ok(model && model.type === "select");
    assert.deepEqual((model.options as Array<{ value: string }>).map((o) => o.value).sort(), ["fake-model", "fake-model-2"]);
    const set = await p.agent.request("session/set_config_option", { sessionId: a.sessionId, configId: "model", value: "fake-model-2" });
    assert.equal(current(set.configOptions, "model"), "fake-model-2");
    const n = rig.fake.requests.length;
    await p.agent.request("session/prompt", { sessionId: a.sessionId, prompt: [{ type: "text", text: "which model?" }] });
    await p.agent.request("session/prompt", { sessionId: b.sessionId, prompt: [{ type: "text", text: "and you?" }] });
    assert.equal((rig.fake.requests[n]!.json as { model: string }).model, "fake-model-2");
    assert.equal((rig.fake.requests[n + 1]!.json as { model: string }).model, "fake-model");
    assert.deepEqual(p.invalid, []);
  } finally {
    await p.end();
  }
});

it("a mode change made during a turn applies from the next turn", async () => {
  let asked = 0;
  const p = rig.spawn({ cwd, client: { permission: () => ((asked += 1), { outcome: { outcome: "selected", optionId: "reject_once" } }) } });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "Waiting" }, { waitForAbort: true }] }]);
  const running = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "wait" }] });
  await p.until(() => p.updates.some((u) => u.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
  assert.deepEqual(await p.agent.request("session/set_mode", { sessionId, modeId: "full" }), {});
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await running).stopReason, "cancelled");
  rig.fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: "echo next > next.txt" } } }] }, { steps: [{ text: "ok" }] }]);
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "now run" }] })).stopReason, "end_turn");
  assert.equal(asked, 0);
  assert.equal(readFileSync(join(cwd, "next.txt"), "utf8"), "next\n");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("'always allow' answers hold for that tool in that session: later calls run without asking", async () => {
  let asked = 0;
  const p = rig.spawn({ cwd, client: { permission: () => ((asked += 1), { outcome: { outcome: "selected", optionId: "allow_always" } }) } });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([
    { steps: [{ toolCall: { id: "a1", name: "bash", arguments: { command: "echo 1 >> always.txt" } } }] },
    { steps: [{ toolCall: { id: "a2", name: "bash", arguments: { command: "echo 2 >> always.txt" } } }] },
    { steps: [{ text: "ok" }] },
  ]);
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "twice" }] })).stopReason, "end_turn");
  assert.equal(asked, 1);
  assert.equal(readFileSync(join(cwd, "always.txt"), "utf8"), "1\n2\n");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("an http MCP server (not advertised) is refused with -32602", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  await assert.rejects(
    p.agent.request("session/new", { cwd, mcpServers: [{ type: "http", name: "web", url: "http://127.0.0.1:1/mcp", headers: [] }] }),
    code(-32602),
  );
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("$/cancel_request of a running prompt cancels its turn: answered with stopReason cancelled", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "Long" }, { waitForAbort: true }] }]);
  const ctl = new AbortController();
  const running = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "long" }] }, { cancellationSignal: ctl.signal });
  await p.until(() => p.updates.some((u) => u.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
  ctl.abort();
  assert.equal((await running).stopReason, "cancelled");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("session/close during a turn cancels it: the prompt answers cancelled, then close answers", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "Going" }, { waitForAbort: true }] }]);
  const running = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "go" }] });
  await p.until(() => p.updates.some((u) => u.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
  assert.deepEqual(await p.agent.request("session/close", { sessionId }), {});
  assert.equal((await running).stopReason, "cancelled");
  const promptId = p.sent.findLast((f) => f["method"] === "session/prompt")!["id"];
  const closeId = p.sent.findLast((f) => f["method"] === "session/close")!["id"];
  const at = (id: unknown) => p.received.findIndex((f) => f["id"] === id && "result" in f);
  assert.ok(at(promptId) < at(closeId), "the prompt's answer comes before close's");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
