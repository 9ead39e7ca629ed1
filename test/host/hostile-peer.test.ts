/**
 * A hostile or buggy AHP peer at the JSON-RPC level (AHP "Base Protocol": requests carry an `id` and get exactly one
 * response; `unsubscribe` and `dispatchAction` are the client's notifications; one JSON-RPC message per text frame):
 *  - a method AHP defines as a request, sent as a notification, is not run (its answer could never reach the client)
 *    and is refused with -32600, id null, naming the method and the fix;
 *  - `dispatchAction` sent as a request is answered: `null` once the action is taken, -32602 naming the shape when its
 *    params cannot be read (as a notification such params are dropped: nothing can be answered);
 *  - every other client is served meanwhile.
 * Real sockets: a fake provider over the backend socket, AHP clients over the host's WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { wsText } from "../../src/transport/ws-text.js";
import { CLOSE_REASONS } from "../../src/protocols/host/ahp-socket.js";

const ROOT = "ahp-root://";

/** The id-null errors the host sent `c` (refusals of messages it could not correlate). */
const refusals = (c: AhpClient): Json[] => c.notes.filter((n) => n.error && n.id === null);

test("finding: initialize sent as a notification initialized the connection silently and streamed envelopes with no snapshot", () =>
  withHost(async (h) => {
    const c = await AhpClient.open(h);
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "initialize", params: { channel: ROOT, protocolVersions: ["1.0.0"], clientId: "n1", initialSubscriptions: [ROOT] } }));
    await until(() => refusals(c).length === 1, 5000, "the refusal");
    assert.deepEqual(refusals(c)[0], {
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: '"initialize" is a request: send it with an id (sent as a notification it was not run, as its answer could not be sent)' },
    });
    assert.ok(![...(h.state.subs.get(ROOT) ?? [])].some((s) => s.clientId === "n1"), "nothing was subscribed");
    // Not initialized: a request says so, and initialize (as a request) then works.
    assert.equal((await c.request("listSessions")).error?.code, -32600);
    const ok = await c.request("initialize", { channel: ROOT, protocolVersions: ["1.0.0"], clientId: "n1", initialSubscriptions: [ROOT] });
    assert.equal(ok.result?.snapshots?.[0]?.resource, ROOT, JSON.stringify(ok));
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("finding: a request-only method sent as a notification ran unanswered (createSession reached the provider; subscribe subscribed with no snapshot)", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 8, ["prov"]);
    const { c } = await AhpClient.init(h, [], "c1");
    const { c: other } = await AhpClient.init(h, [ROOT], "c2");
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "createSession", params: { channel: "ahp-session:/quiet", provider: "prov" } }));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "subscribe", params: { channel: ROOT } }));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "ping" }));
    await until(() => refusals(c).length === 3, 5000, "three refusals");
    assert.deepEqual(
      refusals(c).map((r) => r.error.message as string),
      ["createSession", "subscribe", "ping"].map((m) => `"${m}" is a request: send it with an id (sent as a notification it was not run, as its answer could not be sent)`),
    );
    await be.roundTrip();
    assert.deepEqual(be.frames.filter((f) => f.type === "provider_command"), [], "no session creation reached the provider");
    assert.ok(!h.state.creations.has("ahp-session:/quiet"));
    assert.ok(![...(h.state.subs.get(ROOT) ?? [])].some((s) => s.clientId === "c1"), "subscribe as a notification subscribed nothing");
    // The notifications AHP defines stay notifications: no answer, no refusal.
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "unsubscribe", params: { channel: ROOT } }));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "no/such/notification", params: {} }));
    assert.equal((await c.request("ping")).result, null);
    assert.equal(refusals(c).length, 3);
    // Both connections go on working.
    assert.equal((await other.request("listSessions")).error, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
    other.close();
    be.close();
  }));

test("finding: dispatchAction sent before initialize was dropped without a word", () =>
  withHost(async (h) => {
    const c = await AhpClient.open(h);
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "dispatchAction", params: { channel: ROOT, clientSeq: 1, action: { type: "root/x" } } }));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "no/such/notification", params: {} }));
    await until(() => refusals(c).length === 1, 5000, "the refusal");
    assert.deepEqual(refusals(c)[0]!.error, {
      code: -32600,
      message: '"dispatchAction" needs an initialized connection: send initialize (or reconnect, to resume an earlier connection) first (sent as a notification, it was dropped)',
    });
    // An unknown notification is dropped as JSON-RPC asks, before initialize as after.
    assert.equal((await c.request("ping")).result, null);
    assert.equal(refusals(c).length, 1);
    c.close();
  }));

test("finding: dispatchAction sent as a request with params it cannot read was answered null, as if taken", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h, [ROOT], "c1");
    const shape = /^dispatchAction: params must be \{channel, clientSeq, action: \{type, \.\.\.\}\}: /;
    for (const [params, field] of [
      [{}, /channel must be a channel URI/],
      [{ channel: ROOT, action: { type: "root/configChanged", config: {} } }, /clientSeq must be an integer/],
      [{ channel: ROOT, clientSeq: 1 }, /action must be an object with a string type/],
      [{ channel: ROOT, clientSeq: 1, action: { type: 5 } }, /action must be an object with a string type/],
    ] as [Json, RegExp][]) {
      const r = await c.request("dispatchAction", params);
      assert.equal(r.error?.code, -32602, JSON.stringify(r));
      assert.match(r.error.message as string, shape);
      assert.match(r.error.message as string, field);
    }
    // A readable one, as a request, is taken as the notification would be, and answered null.
    const ok = await c.request("dispatchAction", { channel: ROOT, clientSeq: 7, action: { type: "root/noSuchAction" } });
    assert.equal(ok.result, null, JSON.stringify(ok));
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("finding: a malformed envelope (a batch, an id of the wrong type, a huge id) got only \"invalid JSON-RPC message\"; it names the fault", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h, [], "c1");
    const answers: Json[] = [];
    c.ws.on("message", (d) => answers.push(JSON.parse(wsText(d)) as Json));
    const idRule = /^id must be a string or a number of at most 2\^53 - 1 in magnitude \(absent for a notification; null is reserved for errors\), not /;
    const cases: [string, number, unknown, RegExp][] = [
      // AHP: one JSON-RPC message per text frame; a JSON-RPC batch is one invalid request, nothing of it is run.
      [JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "ping" }, { jsonrpc: "2.0", id: 2, method: "ping" }]), -32600, null, /^a batch \(a JSON array of messages\) is not served: send each JSON-RPC message by itself$/],
      ["[]", -32600, null, /^a batch/],
      ["42", -32600, null, /^a JSON-RPC message must be a JSON object, not a number$/],
      ["{nope", -32700, null, /^parse error: the message is not JSON text$/],
      [JSON.stringify({ id: 3, method: "ping" }), -32600, 3, /^jsonrpc must be "2\.0"/],
      [JSON.stringify({ jsonrpc: "2.0", id: null, method: "ping" }), -32600, null, new RegExp(`${idRule.source}null$`)],
      [JSON.stringify({ jsonrpc: "2.0", id: { a: 1 }, method: "ping" }), -32600, null, new RegExp(`${idRule.source}an object$`)],
      [JSON.stringify({ jsonrpc: "2.0", id: [1], method: "ping" }), -32600, null, new RegExp(`${idRule.source}a list$`)],
      [JSON.stringify({ jsonrpc: "2.0", id: true, method: "ping" }), -32600, null, new RegExp(`${idRule.source}a boolean$`)],
      // A number past 2^53 cannot be echoed as sent (it would come back as 1.2345678901234568e+29): refused, not renamed.
      ['{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}', -32600, null, new RegExp(`${idRule.source}a larger number$`)],
      ['{"jsonrpc":"2.0","id":1e400,"method":"ping"}', -32600, null, new RegExp(`${idRule.source}a larger number$`)],
      [JSON.stringify({ jsonrpc: "2.0", id: 4, method: 5 }), -32600, 4, /^method must be a non-empty string/],
      [JSON.stringify({ jsonrpc: "2.0", id: 5, method: "listSessions", params: [1, 2] }), -32602, 5, /^listSessions: params must be an object of named parameters, or absent; not a list$/],
      [JSON.stringify({ jsonrpc: "2.0", id: 6, method: "initialize", params: "1.0.0" }), -32602, 6, /^initialize: params must be an object of named parameters, or absent; not a string$/],
    ];
    for (const [text, code, id, why] of cases) {
      const before = answers.length;
      c.ws.send(text);
      await until(() => answers.length > before, 5000, `the answer to ${text.slice(0, 60)}`);
      const a = answers[before]!;
      assert.equal(a.error?.code, code, `${text.slice(0, 60)}: ${JSON.stringify(a)}`);
      assert.equal(a.id, id, text.slice(0, 60));
      assert.match(a.error.message as string, why, text.slice(0, 60));
    }
    // Ids that JSON-RPC allows are echoed exactly; the connection went on working throughout.
    for (const id of ["abc", "", 0, -7, 1.5, Number.MAX_SAFE_INTEGER, "x".repeat(100_000)]) {
      const before = answers.length;
      c.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method: "ping" }));
      await until(() => answers.length > before, 5000, "the ping answer");
      assert.deepEqual(answers[before], { jsonrpc: "2.0", id, result: null });
    }
    c.close();
  }));

test("finding: a text frame that is not UTF-8, or a message over 16 MiB, closed the connection with no reason", () =>
  withHost(async (h) => {
    const { c: other } = await AhpClient.init(h, [ROOT], "bystander");
    const closeOf = async (send: (c: AhpClient) => void): Promise<{ code: number; reason: string }> => {
      const { c } = await AhpClient.init(h, [ROOT], "hostile");
      const closed = new Promise<{ code: number; reason: string }>((resolve) => c.ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));
      send(c);
      return closed;
    };
    // RFC 6455 §8.1: invalid UTF-8 in a text message fails the connection (1007).
    const notUtf8 = await closeOf((c) => c.ws.send(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { binary: false }));
    assert.deepEqual(notUtf8, { code: 1007, reason: "a text frame was not UTF-8: AHP messages are UTF-8 JSON text" });
    const tooBig = await closeOf((c) => c.ws.send(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"${"x".repeat(16 * 1024 * 1024)}"}}`));
    assert.deepEqual(tooBig, { code: 1009, reason: "a message was larger than 16 MiB, the most this host reads: send less in one message" });
    for (const reason of Object.values(CLOSE_REASONS)) assert.ok(Buffer.byteLength(reason) <= 123, `fits a close frame: ${reason}`);
    // Binary frames are answered, not closed on (AHP sends text frames only).
    const { c } = await AhpClient.init(h, [], "binary");
    c.ws.send(Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" })), { binary: true });
    await until(() => refusals(c).length === 1, 5000, "the binary-frame refusal");
    assert.equal(refusals(c)[0]!.error.message, "binary frames are not AHP messages: send each JSON-RPC message as one text frame");
    assert.equal((await c.request("ping")).result, null);
    // The other client was served throughout.
    assert.equal((await other.request("ping")).result, null);
    assert.ok(!other.closed);
    c.close();
    other.close();
  }));

test("10 MB string params and a 1 MB method name are answered with bounded messages, and the connection goes on", () =>
  withHost(async (h) => {
    const big = "x".repeat(10 * 1024 * 1024);
    const c = await AhpClient.open(h);
    const id = await c.request("initialize", { channel: ROOT, protocolVersions: ["1.0.0"], clientId: big }, 60_000);
    assert.equal(id.error?.code, -32602);
    assert.equal(id.error.message, `initialize: clientId must be the client's ID, a string of 1 to 512 characters (${big.length} were sent)`);
    assert.equal((await c.request("initialize", { channel: ROOT, protocolVersions: ["1.0.0"], clientId: "c1" })).error, undefined);
    const method = await c.request("m".repeat(1024 * 1024));
    assert.equal(method.error?.code, -32601);
    assert.ok((method.error.message as string).length < 100);
    const sub = await c.request("subscribe", { channel: big }, 60_000);
    assert.equal(sub.error?.code, -32008);
    assert.ok((sub.error.message as string).length <= 512);
    assert.equal((await c.request("ping")).result, null);
    c.close();
  }));

test("finding: the host answered a client's id-null error response with one of its own (two such peers looped for ever)", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h, [], "c1");
    const answers: Json[] = [];
    c.ws.on("message", (d) => answers.push(JSON.parse(wsText(d)) as Json));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "your last message was unreadable" } }));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", id: "no-such-request", result: {} }));
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", id: 41, method: "ping" }));
    await until(() => answers.length > 0, 5000, "an answer");
    assert.deepEqual(answers[0], { jsonrpc: "2.0", id: 41, result: null }, "responses are never answered");
    c.close();
  }));
