/**
 * A hostile or buggy AHP client's `initialize` (AHP lifecycle "Connection Handshake"; `InitializeParams`):
 *  - params this host cannot read are refused with -32602 (InvalidParams) naming the first field at fault, what it must
 *    be and the fix, and the connection goes on working (it can still initialize);
 *  - offered versions of which none is spoken are refused with -32005 (UnsupportedProtocolVersion), `data.supportedVersions`,
 *    a message naming what was offered and what to offer, and the connection is closed;
 *  - a second `initialize` on an initialized connection is refused, saying how to initialize again.
 * Real sockets: AHP clients over the host's WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, until, withHost, type Json } from "./helpers.js";

const ROOT = "ahp-root://";

test("finding: a malformed initialize was refused as just \"invalid initialize params\"; the refusal names the field and the fix", () =>
  withHost(async (h) => {
    const c = await AhpClient.open(h);
    const ok = { channel: ROOT, protocolVersions: ["1.0.0"], clientId: "c1" };
    const without = (k: string): Json => Object.fromEntries(Object.entries(ok).filter(([key]) => key !== k));
    const cases: [Json, RegExp][] = [
      [{ ...ok, channel: "ahp-session:/x" }, /^initialize: channel must be "ahp-root:\/\/"/],
      [without("protocolVersions"), /^initialize: protocolVersions is missing: it must be a list of the AHP versions the client speaks.*e\.g\. \["1\.0\.0"\]/],
      [{ ...ok, protocolVersions: "1.0.0" }, /^initialize: protocolVersions must be a list of the AHP versions .*, not a string/],
      [{ ...ok, protocolVersions: [] }, /^initialize: protocolVersions must name at least one version/],
      [{ ...ok, protocolVersions: Array(65).fill("1.0.0") }, /^initialize: protocolVersions holds at most 64 versions \(65 were sent\)/],
      [{ ...ok, protocolVersions: ["1.0.0", 1] }, /^initialize: protocolVersions\[1\] must be a version string "MAJOR\.MINOR\.PATCH", not a number/],
      [without("clientId"), /^initialize: clientId is missing: it must be the client's ID, a string of 1 to 512 characters/],
      [{ ...ok, clientId: 7 }, /^initialize: clientId must be the client's ID, a string of 1 to 512 characters, not a number/],
      [{ ...ok, clientId: "" }, /^initialize: clientId must be the client's ID, a string of 1 to 512 characters \(0 were sent\)/],
      [{ ...ok, clientId: "x".repeat(513) }, /^initialize: clientId must be .* \(513 were sent\)/],
      [{ ...ok, clientInfo: "berth-ui" }, /^initialize: clientInfo must be an object \{name, version\?, title\?\} naming the client's implementation, or absent; not a string/],
      [{ ...ok, clientInfo: { version: "1" } }, /^initialize: clientInfo\.name must be a string/],
      [{ ...ok, initialSubscriptions: ROOT }, /^initialize: initialSubscriptions must be a list of channel URIs, or absent; not a string/],
      [{ ...ok, initialSubscriptions: Array.from({ length: 10_001 }, (_, i) => `ahp-chat:/x${i}`) }, /^initialize: initialSubscriptions holds at most 10000 channel URIs \(10001 were sent\); subscribe to the rest after initializing/],
      [{ ...ok, initialSubscriptions: [ROOT, ""] }, /^initialize: initialSubscriptions\[1\] must be a channel URI \(a non-empty string\)/],
      [{ ...ok, locale: 5 }, /^initialize: locale must be a BCP 47 language tag such as "en-US", or absent; not a number/],
    ];
    for (const [params, why] of cases) {
      const r = await c.request("initialize", params);
      assert.equal(r.error?.code, -32602, `${JSON.stringify(params).slice(0, 80)}: ${JSON.stringify(r)}`);
      assert.match(r.error.message as string, why);
      assert.ok((r.error.message as string).length <= 512);
    }
    // Nothing was set by the refusals: the connection still initializes.
    const good = await c.request("initialize", { ...ok, initialSubscriptions: [ROOT] });
    assert.equal(good.result?.protocolVersion, "1.0.0", JSON.stringify(good));
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("finding: an unsupported protocol version said only \"no mutually supported protocol version\"; it names what was offered and what to offer", () =>
  withHost(async (h) => {
    for (const offered of [["0.8.0", "2.0.0"], ["1.0", "v1.0.0"]]) {
      const c = await AhpClient.open(h);
      const r = await c.request("initialize", { channel: ROOT, protocolVersions: offered, clientId: "c1" });
      assert.equal(r.error?.code, -32005);
      assert.deepEqual(r.error.data, { supportedVersions: [">=1.0.0 <2.0.0", ">=0.9.0 <0.10.0"] });
      assert.equal(
        r.error.message,
        `initialize: none of the offered protocol versions ${JSON.stringify(offered)} is one this host speaks (MAJOR.MINOR.PATCH within >=1.0.0 <2.0.0 or >=0.9.0 <0.10.0, listed in data.supportedVersions); offer one of them, e.g. "1.0.0"`,
      );
      // The host closes the connection after this answer (AHP: the handshake failed).
      await until(() => c.closed, 5000, "the connection closed after -32005");
    }
    // Another client is served meanwhile.
    const { c } = await AhpClient.init(h);
    assert.equal((await c.request("ping")).result, null);
    c.close();
  }));

test("finding: a second initialize said only \"already initialized\"; it names the negotiated version and how to initialize again", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h, [ROOT], "c1");
    const again = await c.request("initialize", { channel: ROOT, protocolVersions: ["0.9.0"], clientId: "c2" });
    assert.equal(again.error?.code, -32600);
    assert.equal(again.error.message, 'initialize: this connection is already initialized (protocol 1.0.0, client "c1"); initialize is sent once per connection: open a new connection to initialize again');
    // Nothing changed: the first negotiation stands and the connection goes on working.
    assert.equal((await c.request("listSessions")).error, undefined);
    const before = await AhpClient.open(h);
    const early = await before.request("listSessions");
    assert.equal(early.error?.code, -32600);
    assert.equal(early.error.message, '"listSessions" needs an initialized connection: send initialize (or reconnect, to resume an earlier connection) first');
    before.close();
    c.close();
  }));

test("finding: a malformed createSession or createChat was refused as just \"invalid … params\"; the refusal names the field", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h, [], "c1");
    const cases: [string, Json, RegExp][] = [
      ["createSession", { provider: "p" }, /^createSession: channel: .*expected string/i],
      ["createSession", { channel: "ahp-session:/a", workingDirectories: "file:///w" }, /^createSession: workingDirectories: .*expected array/i],
      ["createSession", { channel: "ahp-session:/a", workingDirectories: ["file:///w", 3] }, /^createSession: workingDirectories\.1: .*expected string/i],
      ["createChat", { channel: "ahp-session:/a" }, /^createChat: chat: .*expected string/i],
      ["createChat", { channel: "ahp-session:/a", chat: "ahp-chat:/b", title: 5 }, /^createChat: title: .*expected string/i],
      ["createChat", { channel: "ahp-session:/a", chat: "ahp-chat:/b", source: { kind: "fork", chat: "ahp-chat:/a" } }, /^createChat: source\.turnId: .*expected string/i],
    ];
    for (const [method, params, why] of cases) {
      const r = await c.request(method, params);
      assert.equal(r.error?.code, -32602, `${method} ${JSON.stringify(params)}: ${JSON.stringify(r)}`);
      assert.match(r.error.message as string, why);
    }
    assert.deepEqual(c.invalid, []);
    c.close();
  }));
