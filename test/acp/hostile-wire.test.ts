/**
 * Hostile and malformed JSON-RPC on `berth acp`'s stdin, written raw past the SDK client: every bad message gets a
 * JSON-RPC error with a fixed message, and the agent keeps serving the requests that follow it.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import type { ContentBlock } from "@agentclientprotocol/sdk";
import { MAX_IMAGE_BYTES, MAX_PROMPT_IMAGE_BYTES } from "../../src/protocols/acp/prompt-content.js";
import { MAX_MESSAGE_BYTES, WIRE_ERRORS } from "../../src/protocols/acp/wire.js";
import { type AcpAgentProcess, type AcpRig, type Frame, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

const answer = (p: AcpAgentProcess, id: unknown): Frame | undefined => p.received.find((f) => f["id"] === id && f["method"] === undefined);
const write = (p: AcpAgentProcess, ...msgs: unknown[]): void => void p.child.stdin.write(msgs.map((m) => (typeof m === "string" ? m : JSON.stringify(m)) + "\n").join(""));

it("an initialize that is no JSON-RPC 2.0 request is refused, and an initialize after it is answered", { timeout: 30_000 }, async () => {
  const p = rig.spawn();
  // Each is answered -32600 with id null (its id cannot be used); none may hold up what follows it.
  write(
    p,
    { jsonrpc: "1.0", id: 1, method: "initialize", params: { protocolVersion: 1 } },
    { jsonrpc: "2.0", id: { odd: true }, method: "initialize", params: { protocolVersion: 1 } },
    { jsonrpc: "2.0", id: [2], method: "initialize", params: { protocolVersion: 1 } },
    { id: 3, method: "initialize", params: { protocolVersion: 1 } },
    { jsonrpc: "2.0", id: 4, method: "initialize", params: { protocolVersion: 1 } },
  );
  await p.until(() => answer(p, 4), "the answer to the well-formed initialize");
  assert.equal(answer(p, 4)!["result"]?.protocolVersion, 1);
  const refused = p.received.filter((f) => f["id"] === null && f["error"]?.code === -32600);
  assert.equal(refused.length, 4, JSON.stringify(p.received));
  assert.equal(answer(p, 1), undefined);
  assert.equal(answer(p, 3), undefined);
  await p.end();
});

it("a line past the message limit is answered -32600 and skipped; the running turn and the connection go on", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "Working" }, { waitForAbort: true }] }]);
  const running = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "long job" }] });
  await p.until(() => p.updatesOf(sessionId).some((u) => u.sessionUpdate === "agent_message_chunk"), "the turn's first chunk");
  const huge = { jsonrpc: "2.0", id: 900, method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text: "x".repeat(MAX_MESSAGE_BYTES) }] } };
  write(p, huge, { jsonrpc: "2.0", id: 901, method: "session/list", params: {} });
  await p.until(() => answer(p, 901), "the answer to the request after the long line");
  assert.ok(Array.isArray(answer(p, 901)!["result"]?.sessions));
  assert.equal(answer(p, 900), undefined, "the long line is not read as a request");
  assert.deepEqual(
    p.received.filter((f) => f["id"] === null),
    [{ jsonrpc: "2.0", id: null, error: { code: -32600, message: WIRE_ERRORS.tooLarge } }],
  );
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await running).stopReason, "cancelled");
  assert.equal(p.child.exitCode, null, "berth acp is still running");
  await p.end();
});

it("the largest prompt Berth accepts fits the wire: images up to the per-prompt total are read, more is -32602", { timeout: 120_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  const png = Buffer.alloc(MAX_IMAGE_BYTES);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
  const image: ContentBlock = { type: "image", mimeType: "image/png", data: png.toString("base64") };
  const n = MAX_PROMPT_IMAGE_BYTES / MAX_IMAGE_BYTES;
  const text: ContentBlock = { type: "text", text: "look" };
  const r = await p.agent.request("session/prompt", { sessionId, prompt: [text, ...Array.from({ length: n }, () => image)] });
  assert.equal(r.stopReason, "end_turn");
  await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [text, ...Array.from({ length: n + 1 }, () => image)] }), (e: { code?: number; message?: string }) => {
    assert.equal(e.code, -32602);
    assert.equal(e.message, `Invalid params: a prompt's images together are larger than ${MAX_PROMPT_IMAGE_BYTES} bytes`);
    return true;
  });
  assert.equal(p.child.exitCode, null);
  await p.end();
});

it("lines that are no JSON-RPC 2.0 message get fixed errors without their content echoed; serving goes on", { timeout: 30_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const secret = "sk-do-not-echo-0123456789";
  write(
    p,
    "{not json",
    `"${secret}"`,
    "42",
    { jsonrpc: "1.0", id: 5, method: "session/list", params: { cwd: `/${secret}` } },
    { jsonrpc: "2.0", id: true, method: "session/list", params: {} },
    {},
    [{ jsonrpc: "2.0", id: 6, method: "session/list", params: {} }],
    { jsonrpc: "2.0", id: 7, method: "session/list", params: {} },
  );
  await p.until(() => answer(p, 7), "the answer to the well-formed request");
  // One error each (id null), in no promised order: the SDK answers some while framing, others while dispatching.
  const refused = p.received.filter((f) => f["id"] === null).map((f) => JSON.stringify(f["error"]));
  assert.deepEqual(
    refused.sort(),
    [
      { code: -32700, message: WIRE_ERRORS.parse },
      ...Array.from({ length: 5 }, () => ({ code: -32600, message: WIRE_ERRORS.notJsonRpc })),
      { code: -32600, message: "Invalid request: JSON-RPC batches are not supported" },
    ]
      .map((e) => JSON.stringify(e))
      .sort(),
  );
  assert.equal(JSON.stringify(p.received).includes(secret), false, "nothing the client sent is echoed");
  assert.equal(answer(p, 5), undefined);
  assert.equal(answer(p, 6), undefined);
  assert.deepEqual(p.invalid.filter((x) => !x.startsWith("response to unknown id")), []);
  await p.end();
});

it("images with bad base64, or bytes of another type than their mimeType, are -32602 before anything runs", { timeout: 30_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  const n = rig.fake.requests.length;
  const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]).toString("base64");
  for (const [data, mimeType, why] of [
    ["!!!not base64!!!", "image/png", "an image's data is not valid base64"],
    ["iVBORw0KGgo", "image/png", "an image's data is not valid base64"],
    ["", "image/png", "an image's data is not valid base64"],
    [jpeg, "image/png", "an image's bytes are not of the type its mimeType names"],
    ["R0lGODlhAQABAAAAACw=", "image/webp", "an image's bytes are not of the type its mimeType names"],
  ] as const) {
    await assert.rejects(p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "see" }, { type: "image", mimeType, data }] }), (e: { code?: number; message?: string }) => {
      assert.equal(e.code, -32602, data);
      assert.equal(e.message, `Invalid params: ${why}`);
      return true;
    });
  }
  assert.equal(rig.fake.requests.length, n, "no turn ran");
  // Real images of each type (whitespace in the base64 is allowed) still go through.
  const gif = "R0lGODlhAQABAAAAACw=";
  const r = await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "see" }, { type: "image", mimeType: "image/jpeg", data: jpeg }, { type: "image", mimeType: "image/gif", data: `${gif.slice(0, 8)}\n${gif.slice(8)}` }] });
  assert.equal(r.stopReason, "end_turn");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
