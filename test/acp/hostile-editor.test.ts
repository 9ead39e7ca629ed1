/**
 * `berth acp` against an editor that breaks JSON-RPC's and ACP's rules on purpose: requests reusing an ID still in
 * flight, notifications sent as requests, a prompt for a session being closed. Each is refused with a fixed message
 * naming the fix, nothing is run twice, and the connection goes on.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { McpServer } from "@agentclientprotocol/sdk";
import { ACP_ERRORS, MAX_OPEN_SESSIONS, MAX_SESSION_MCP_SERVERS } from "../../src/protocols/acp/errors.js";
import { DUPLICATE_ID, MAX_QUOTED, notificationAsRequest, unknownMethod } from "../../src/protocols/acp/request-ids.js";
import { type AcpAgentProcess, type AcpRig, type Frame, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

const answers = (p: AcpAgentProcess, id: unknown): Frame[] => p.received.filter((f) => f["id"] === id && f["method"] === undefined);

it("a request reusing the id of one still being answered is not run: -32600 with id null; the id is free again once answered", { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-dup-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const before = (await p.agent.request("session/list", {})).sessions.length;
  const make = (id: unknown): Frame => ({ jsonrpc: "2.0", id, method: "session/new", params: { cwd, mcpServers: [] } });
  // Three with one id in one write (the first is still being answered when the others are read), and a string id
  // equal to it as text (a different id).
  p.writeFrames([make(7), make(7), make(7), make("7")]);
  await p.until(() => answers(p, 7).length === 1 && answers(p, "7").length === 1, "the answers");
  await p.until(() => answers(p, null).length === 2, "the refusals");
  assert.deepEqual(answers(p, null).map((f) => f["error"]), [{ code: -32600, message: DUPLICATE_ID }, { code: -32600, message: DUPLICATE_ID }]);
  assert.ok(answers(p, 7)[0]!["result"]?.sessionId);
  const listed = (await p.agent.request("session/list", {})).sessions.length;
  assert.equal(listed - before, 2, "two sessions were made, not four");
  // Answered: the id may be used again.
  p.writeFrames([make(7)]);
  await p.until(() => answers(p, 7).length === 2, "the second answer to id 7");
  assert.ok(answers(p, 7)[1]!["result"]?.sessionId);
  assert.equal(answers(p, null).length, 2);
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it("session/cancel or $/cancel_request sent as a request is -32601 saying to send it without an id; the turn goes on", { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-notif-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  let go!: () => void;
  rig.fake.script([{ steps: [{ text: "partial " }, { hold: new Promise<void>((r) => (go = r)) }, { text: "rest" }] }]);
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "talk" }] });
  await p.until(() => p.updatesOf(sessionId).some((u) => u.sessionUpdate === "agent_message_chunk"), "the first chunk");
  p.writeFrames([
    { jsonrpc: "2.0", id: "c1", method: "session/cancel", params: { sessionId } },
    { jsonrpc: "2.0", id: "c2", method: "$/cancel_request", params: { requestId: 0 } },
  ]);
  await p.until(() => answers(p, "c1").length === 1 && answers(p, "c2").length === 1, "both answers");
  assert.deepEqual(answers(p, "c1")[0]!["error"], { code: -32601, message: notificationAsRequest("session/cancel") });
  assert.deepEqual(answers(p, "c2")[0]!["error"], { code: -32601, message: notificationAsRequest("$/cancel_request") });
  go();
  assert.deepEqual(await prompt, { stopReason: "end_turn" });
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it("a prompt or mode change read after a session/close of its session (still queued behind a resume) is -32002, and nothing of it is stored", { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-closing-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "should not run" }] }]);
  // The close waits for the resume before it (one session's lifecycle requests run in arrival order); the prompt
  // and the mode change come after the close.
  p.writeFrames([
    { jsonrpc: "2.0", id: "resume", method: "session/resume", params: { sessionId, cwd, mcpServers: [] } },
    { jsonrpc: "2.0", id: "close", method: "session/close", params: { sessionId } },
    { jsonrpc: "2.0", id: "prompt", method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text: "sent after close" }] } },
    { jsonrpc: "2.0", id: "mode", method: "session/set_mode", params: { sessionId, modeId: "full" } },
  ]);
  await p.until(() => ["resume", "close", "prompt", "mode"].every((id) => answers(p, id).length === 1), "every answer");
  assert.ok(answers(p, "resume")[0]!["result"]);
  assert.deepEqual(answers(p, "close")[0]!["result"], {});
  for (const id of ["prompt", "mode"]) assert.equal(answers(p, id)[0]!["error"]?.code, -32002, `${id}: ${JSON.stringify(answers(p, id))}`);
  assert.equal(rig.fake.unscript(), 1, "no turn ran");
  assert.doesNotMatch(readFileSync(join(rig.home, "sessions", `${sessionId}.jsonl`), "utf8"), /sent after close/);
  // Opened again, the session takes prompts as ever.
  await p.agent.request("session/resume", { sessionId, cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "ok" }] }]);
  assert.deepEqual(await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] }), { stopReason: "end_turn" });
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it(`at most ${MAX_OPEN_SESSIONS} sessions are open at once: one more is -32600 naming session/close, and a close makes room`, { timeout: 120_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-many-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const make = (id: number): Frame => ({ jsonrpc: "2.0", id: `n${id}`, method: "session/new", params: { cwd, mcpServers: [] } });
  // All in one write, one more than the bound: the last one read is refused however they interleave.
  p.writeFrames(Array.from({ length: MAX_OPEN_SESSIONS + 1 }, (_, i) => make(i)));
  const made = (): Frame[] => p.received.filter((f) => typeof f["id"] === "string" && f["id"].startsWith("n") && f["method"] === undefined);
  await p.until(() => made().length === MAX_OPEN_SESSIONS + 1, "every answer");
  const refused = made().filter((f) => f["error"] !== undefined);
  assert.deepEqual(refused.map((f) => f["error"]), [{ code: -32600, message: ACP_ERRORS.tooManySessions().message }]);
  const ids = made().flatMap((f) => (f["result"]?.sessionId !== undefined ? [f["result"].sessionId as string] : []));
  assert.equal(ids.length, MAX_OPEN_SESSIONS);
  // Nothing was stored for the refused one.
  let stored = 0;
  for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
    const page = await p.agent.request("session/list", { cwd, ...(cursor !== undefined ? { cursor } : {}) });
    stored += page.sessions.length;
    cursor = page.nextCursor ?? undefined;
  }
  assert.equal(stored, MAX_OPEN_SESSIONS);
  await assert.rejects(p.agent.request("session/new", { cwd, mcpServers: [] }), (e: { code?: number }) => e.code === -32600);
  await p.agent.request("session/close", { sessionId: ids[0]! });
  // Resuming the closed one refills the place; a new one is then refused again.
  await p.agent.request("session/resume", { sessionId: ids[0]!, cwd, mcpServers: [] });
  await assert.rejects(p.agent.request("session/new", { cwd, mcpServers: [] }), (e: { code?: number }) => e.code === -32600);
  await p.agent.request("session/close", { sessionId: ids[1]! });
  assert.ok((await p.agent.request("session/new", { cwd, mcpServers: [] })).sessionId);
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it(`more than ${MAX_SESSION_MCP_SERVERS} MCP servers for one session is -32602 before anything is stored or started`, { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-mcp-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const servers = (n: number): McpServer[] => Array.from({ length: n }, (_, i) => ({ name: `s${i}`, command: "/nonexistent/mcp-server", args: [], env: [] }));
  const refused = (e: { code?: number; message?: string }): boolean => e.code === -32602 && e.message === ACP_ERRORS.tooManyMcpServers().message;
  await assert.rejects(p.agent.request("session/new", { cwd, mcpServers: servers(MAX_SESSION_MCP_SERVERS + 1) }), refused);
  assert.equal((await p.agent.request("session/list", { cwd })).sessions.length, 0, "nothing stored");
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: servers(MAX_SESSION_MCP_SERVERS) });
  await assert.rejects(p.agent.request("session/resume", { sessionId, cwd, mcpServers: servers(MAX_SESSION_MCP_SERVERS + 1) }), refused);
  await assert.rejects(p.agent.request("session/load", { sessionId, cwd, mcpServers: servers(MAX_SESSION_MCP_SERVERS + 1) }), refused);
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

it("an unknown method is -32601 quoting at most 64 characters of its name (not a huge name twice) and naming the fix", { timeout: 30_000 }, async () => {
  const p = rig.spawn();
  await p.initialize({});
  const huge = "m".repeat(1024 * 1024);
  p.writeFrames([
    { jsonrpc: "2.0", id: "huge", method: huge, params: {} },
    { jsonrpc: "2.0", id: "short", method: "bogus/x", params: {} },
  ]);
  await p.until(() => answers(p, "huge").length === 1 && answers(p, "short").length === 1, "both answers");
  const big = answers(p, "huge")[0]!;
  assert.deepEqual(big["error"], { code: -32601, message: unknownMethod(huge), data: { method: `${huge.slice(0, MAX_QUOTED)}…` } });
  assert.ok(JSON.stringify(big).length < 1024);
  assert.deepEqual(answers(p, "short")[0]!["error"], { code: -32601, message: unknownMethod("bogus/x"), data: { method: "bogus/x" } });
  assert.match(unknownMethod("bogus/x"), /^Method not found: bogus\/x is not a method berth acp serves; see /);
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});
