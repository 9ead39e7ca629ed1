/**
 * What `subscribe` and `initialize` answer for each channel a client names (AHP "Channels & Subscriptions"):
 *  - a channel this host has: its snapshot (a chat's without its session being subscribed), or `{}` for a stream;
 *  - a channel it does not have or does not serve: `NotFound` (-32008) naming the URI and why (the URI forms this
 *    host serves, or which of them is gone), never silence; the connection goes on working;
 *  - `initialize`: a stream named in `initialSubscriptions` is subscribed (no snapshot), like a `subscribe`.
 * Real sockets: fake backends over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";
import { changesetPrefix } from "../../src/protocols/host/resources.js";
import { otlpChannel } from "../../src/protocols/host/notifications.js";

const ROOT = "ahp-root://";

test("subscribing to a channel the host does not have or serve is refused naming the URI and why", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "subs" });
    const session = reg.session as string;
    const chat = reg.chat as string;
    const { c } = await AhpClient.init(h, [], "c1");
    // A chat is served on its own: its session need not be subscribed.
    assert.equal((await c.request("subscribe", { channel: chat })).result.snapshot.resource, chat);
    const cases: [string, RegExp][] = [
      ["ahp-session:/gone", /no session "ahp-session:\/gone" on this host: it was disposed or never existed/],
      ["ahp-chat:/gone", /no chat "ahp-chat:\/gone" on this host: it was disposed or never existed/],
      [`${changesetPrefix(session)}later`, /changeset ".*later" does not exist: the session's backend has not sent it/],
      ["ahp-changeset:/gone/x", /changeset "ahp-changeset:\/gone\/x" does not exist: its session "ahp-session:\/gone" is not on this host/],
      [`${session}/annotations`, /no annotations channel ".*\/annotations": the session's backend has not sent one/],
      ["ahp-session:/gone/annotations", /session "ahp-session:\/gone" is not on this host/],
      [`${session}/other`, /this host serves no channel ".*\/other"/],
      ["ahp-terminal:/t1", /this host serves no channel "ahp-terminal:\/t1": it serves ahp-root:\/\/, ahp-session:\/, ahp-chat:\/, ahp-changeset:\/ and <session>\/annotations channels/],
      ["mcp://0123", /mcp:\/\/ side channels are not subscribed/],
      ["ahp-otlp://berth/nothing", /no telemetry channel "ahp-otlp:\/\/berth\/nothing": this host's are ahp-otlp:\/\/berth\/logs, ahp-otlp:\/\/berth\/traces and ahp-otlp:\/\/berth\/metrics/],
      ["", /this host serves no channel "":/],
      [`ahp-chat:/${"x".repeat(100_000)}`, /no chat "ahp-chat:\/x+… on this host/],
    ];
    for (const [uri, why] of cases) {
      const r = await c.request("subscribe", { channel: uri });
      assert.equal(r.error?.code, -32008, `NotFound for ${uri.slice(0, 40)}`);
      assert.match(r.error.message as string, why);
      assert.ok((r.error.message as string).length <= 512, "the message is bounded");
    }
    assert.equal(h.state.subs.get(chat)?.size, 1, "the refusals left the held subscription alone");
    assert.equal((await c.request("ping")).result, null, "the connection goes on working");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("finding: an otlp stream named in initialSubscriptions was dropped silently; it is subscribed, with no snapshot", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 6, ["tel"], { telemetry: { logs: true } });
    const logs = otlpChannel("logs");
    const { c, result } = await AhpClient.init(h, [ROOT, logs, "ahp-chat:/gone"], "tel-init");
    assert.deepEqual((result.snapshots as Json[]).map((s) => s.resource), [ROOT], "a snapshot per state-bearing channel there is");
    const payload = { resourceLogs: [] };
    be.send({ type: "notification", method: "otlp/exportLogs", params: { channel: logs, payload } });
    assert.deepEqual(await c.note("otlp/exportLogs"), { channel: logs, payload });
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
