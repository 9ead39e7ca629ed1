/**
 * Hostile and malformed JSON-RPC on `berth acp`'s stdin, written raw past the SDK client: every bad message gets a
 * JSON-RPC error with a fixed message, and the agent keeps serving the requests that follow it.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { startAcpRig, type AcpAgentProcess, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
before(async () => {
  rig = await startAcpRig();
});
after(async () => {
  await rig.close();
});

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
