/**
 * Who refused a client's action: the host refusing before anything reaches a backend (not connected, the
 * unanswered-commands bound) says so, why and what to do; only the backend's own refusal reads "backend refused".
 * Real sockets: a fake backend over the backend socket, an AHP client over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost } from "./helpers.js";

const NOT_CONNECTED = "the host did not send this to the backend: it is not connected; retry once it reconnects";

test("finding: a host-side refusal reached clients as the backend's; each now names who refused, why and the fix", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "refusals" });
    const session = reg.session as string;
    const { c } = await AhpClient.init(h, [session, reg.chat as string], "c1");
    const configure = (level: string) => c.dispatch(session, { type: "session/configChanged", config: { thinkingLevel: level } });
    const rejection = async (seq: number) => (await c.action((e) => e.origin?.clientSeq === seq && e.rejectionReason !== undefined, `rejection of ${seq}`)).rejectionReason;

    // The backend's own refusal keeps its text.
    const refused = configure("unknown");
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "configure");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: false, error: "unknown level" });
    assert.equal(await rejection(refused), "backend refused: unknown level");

    // The backend goes away: the host refuses, and says it is the host and what to do.
    be.close();
    await until(() => h.state.sessions.get(session)?.route === undefined, 3000, "the route gone");
    assert.equal(await rejection(configure("high")), NOT_CONNECTED);
    const text = "hello";
    const prompt = c.dispatch(reg.chat as string, { type: "chat/turnStarted", turnId: "t1", message: { text, origin: { kind: "user" } } });
    assert.equal(await rejection(prompt), NOT_CONNECTED);
    const created = await c.request("createChat", { channel: session, chat: "ahp-chat:/refusals-side", title: "side" });
    assert.equal(created.error?.message, NOT_CONNECTED);
    assert.deepEqual(created.error?.data, { outcome: "rejected" }, "the data field the host defines is kept");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));
