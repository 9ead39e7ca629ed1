/** The JSON-RPC connection: both directions over a pair wired back to back, and the malformed-input answers. */
import { it } from "node:test";
import assert from "node:assert/strict";
import { JsonRpcConnection, JsonRpcError, JSONRPC_ERRORS } from "../../src/transport/jsonrpc.js";

it("requests, results, errors and notifications cross a pair of connections", async () => {
  const seen: string[] = [];
  const a = new JsonRpcConnection((t) => void b.receive(t), { onRequest: () => null });
  const b = new JsonRpcConnection((t) => void a.receive(t), {
    onRequest(method, params, notification) {
      seen.push(`${method}${notification ? "!" : ""}`);
      if (method === "add") return Promise.resolve((params.x as number) + (params.y as number));
      if (method === "bad") throw new JsonRpcError(JSONRPC_ERRORS.InvalidParams, "bad params", { why: 1 });
      if (method === "boom") throw new Error("secret detail");
      return null;
    },
  });
  assert.equal(await a.request("add", { x: 2, y: 3 }), 5);
  await assert.rejects(a.request("bad"), (e: unknown) => e instanceof JsonRpcError && e.code === -32602 && e.message === "bad params");
  await assert.rejects(a.request("boom"), (e: unknown) => e instanceof JsonRpcError && e.code === -32603 && e.message === "internal error");
  a.notify("note", { n: 1 });
  assert.deepEqual(seen, ["add", "bad", "boom", "note!"]);
});

it("malformed input gets parse / invalid-request errors; close rejects pending requests", async () => {
  const out: unknown[] = [];
  const c = new JsonRpcConnection((t) => out.push(JSON.parse(t)), { onRequest: () => "ok" });
  await c.receive("{nope");
  await c.receive(JSON.stringify({ jsonrpc: "2.0", id: 7 }));
  await c.receive(JSON.stringify({ jsonrpc: "1.0", id: "x", method: "m" }));
  await c.receive(JSON.stringify({ jsonrpc: "2.0", id: 8, method: "m" }));
  assert.deepEqual(out, [
    { jsonrpc: "2.0", id: null, error: { code: -32700, message: "parse error: the message is not JSON text" } },
    { jsonrpc: "2.0", id: 7, error: { code: -32600, message: "method must be a non-empty string (a request or notification names the method it calls)" } },
    { jsonrpc: "2.0", id: "x", error: { code: -32600, message: 'jsonrpc must be "2.0" (JSON-RPC 2.0)' } },
    { jsonrpc: "2.0", id: 8, result: "ok" },
  ]);
  // A batch is one invalid request (nothing of it runs); params are by name; an id JSON cannot carry exactly is refused.
  out.length = 0;
  let ran = 0;
  const d = new JsonRpcConnection((t) => out.push(JSON.parse(t)), { onRequest: () => ++ran });
  await d.receive(JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "m" }]));
  await d.receive(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "m", params: [1] }));
  await d.receive(JSON.stringify({ jsonrpc: "2.0", method: "m", params: "x" }));
  await d.receive('{"jsonrpc":"2.0","id":9007199254740993,"method":"m"}');
  await d.receive(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "m", params: null }));
  assert.deepEqual(out, [
    { jsonrpc: "2.0", id: null, error: { code: -32600, message: "a batch (a JSON array of messages) is not served: send each JSON-RPC message by itself" } },
    { jsonrpc: "2.0", id: 2, error: { code: -32602, message: "m: params must be an object of named parameters, or absent; not a list" } },
    {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "id must be a string or a number of at most 2^53 - 1 in magnitude (absent for a notification; null is reserved for errors), not a larger number" },
    },
    { jsonrpc: "2.0", id: 3, result: 1 },
  ]);
  assert.equal(ran, 1, "only the last message ran");
  const pending = c.request("never");
  c.close("peer gone");
  await assert.rejects(pending, /peer gone/);
  await assert.rejects(c.request("later"), /peer gone/);
});

it("finding: an error response with id null was answered with another, so two connections traded errors for ever", async () => {
  // A peer's id-null error says it could not read something we sent; a response is never answered.
  let sent = 0;
  const a = new JsonRpcConnection((t) => {
    sent++;
    if (sent < 50) void b.receive(t);
  }, { onRequest: () => null });
  const b = new JsonRpcConnection((t) => {
    sent++;
    if (sent < 50) void a.receive(t);
  }, { onRequest: () => null });
  await a.receive(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "refused" } }));
  await a.receive(JSON.stringify({ jsonrpc: "2.0", id: { x: 1 }, result: 1 }));
  await a.receive(JSON.stringify({ jsonrpc: "2.0", id: 99, result: 1 }));
  assert.equal(sent, 0, "no response is answered, whatever its id");
});
