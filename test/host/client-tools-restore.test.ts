/**
 * A client-executed tool call across a host restart: the restored turn's call has no owner until
 * the client named by its contributor sets its active-client entry again; then its content and
 * result are accepted and reach the backend. With no owner back, the turn's end settles it as
 * before. Real host restarts on one state directory, a fake v9 backend with client tools over the
 * real socket, AHP clients over the real WebSocket; envelopes checked against ahp-schema and the
 * state rebuilt from envelopes (client reducers) compared with fresh snapshots.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";
import { clientInputId } from "../../src/protocols/host/client-tools.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const CLIP = { name: "read_clipboard", title: "Read clipboard", inputSchema: { type: "object", properties: {} } };
const hello = { protocolVersion: 9, sourceId: "ctr-src", instanceId: "inst-1", provider: "other", toolCapabilities: { clientTools: true } };
const setClient = (clientId: string, tools: Json[] = [CLIP]) => ({ type: "session/activeClientSet", activeClient: { clientId, tools } });

/** Host 1: a turn whose client call is running when the host stops (nobody closes first). */
async function callInterruptedByRestart(home: string): Promise<Json> {
  let reg: Json = {};
  await withHost(
    async (h) => {
      const first = await FakeBackend.session(h, hello);
      reg = first.reg;
      const ev = (event: Json) => first.be.send({ type: "event", session: reg.session, event });
      const { c } = await AhpClient.init(h, [reg.session, reg.chat], "ca");
      const seq = c.dispatch(reg.session, setClient("ca"));
      assert.equal((await c.action((e) => e.origin?.clientId === "ca" && e.origin.clientSeq === seq)).rejectionReason, undefined);
      ev({ type: "user_message", text: "read it", turnId: "t1" });
      ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard", input: "{}" });
      await c.action((e) => e.action.type === "session/inputNeededSet");
      assert.deepEqual(c.invalid, []);
    },
    { home },
  );
  return reg;
}

async function snapshots(c: AhpClient, reg: Json): Promise<{ session: Json; chat: Json }> {
  const session = (await c.request("subscribe", { channel: reg.session })).result.snapshot as Json;
  const chat = (await c.request("subscribe", { channel: reg.chat })).result.snapshot as Json;
  return { session, chat };
}
const toolOf = (turn: Json): Json => turn.responseParts.find((p: Json) => p.kind === "toolCall").toolCall;

test("a restored client call is re-attached when its client sets its entry again; its result reaches the backend", async () => {
  const home = tempHome();
  const reg = await callInterruptedByRestart(home);
  await withHost(
    async (h: HostHandle) => {
      const { be } = await FakeBackend.session(h, hello);
      const { c: watcher } = await AhpClient.init(h, [], "watcher");
      const first = await snapshots(watcher, reg);
      const restored = toolOf(first.chat.state.activeTurn);
      assert.deepEqual([restored.status, restored.contributor], ["running", { kind: "client", clientId: "ca" }]);
      assert.equal(first.session.state.inputNeeded, undefined, "no owner yet: nothing to execute");

      // Before its client is back, nobody may report the result.
      const { c: other } = await AhpClient.init(h, [reg.session, reg.chat], "cb");
      let seq = other.dispatch(reg.session, setClient("cb"));
      await other.action((e) => e.origin?.clientId === "cb" && e.origin.clientSeq === seq);
      seq = other.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result: { success: true, pastTenseMessage: "done" } });
      assert.notEqual((await other.action((e) => e.origin?.clientId === "cb" && e.origin.clientSeq === seq)).rejectionReason, undefined);

      // The owner comes back (same clientId, a new connection): the call is its own again.
      const { c: a } = await AhpClient.init(h, [reg.session, reg.chat], "ca");
      seq = a.dispatch(reg.session, setClient("ca"));
      assert.equal((await a.action((e) => e.origin?.clientId === "ca" && e.origin.clientSeq === seq)).rejectionReason, undefined);
      const need = await watcher.action((e) => e.action.type === "session/inputNeededSet");
      assert.deepEqual([need.action.request.id, need.action.request.kind, need.action.request.clientId, need.action.request.turnId], [clientInputId(reg.chat, "ct1"), "toolClientExecution", "ca", "t1"]);
      // Still only the owner's connection.
      seq = other.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result: { success: true, pastTenseMessage: "done" } });
      assert.match((await other.action((e) => e.origin?.clientId === "cb" && e.origin.clientSeq === seq)).rejectionReason, /only the client executing this tool call/);

      seq = a.dispatch(reg.chat, { type: "chat/toolCallContentChanged", turnId: "t1", toolCallId: "ct1", content: [{ type: "text", text: "reading" }] });
      let cmd = await be.nextType("command");
      assert.deepEqual(cmd.command, { type: "client_tool_content", turnId: "t1", toolCallId: "ct1", content: [{ type: "text", text: "reading" }] });
      be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
      assert.equal((await a.action((e) => e.origin?.clientId === "ca" && e.origin.clientSeq === seq)).rejectionReason, undefined);
      const result = { success: true, pastTenseMessage: "Read the clipboard", content: [{ type: "text", text: "hello" }] };
      seq = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
      cmd = await be.nextType("command");
      assert.deepEqual(cmd.command, { type: "complete_client_tool", turnId: "t1", toolCallId: "ct1", result });
      be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
      assert.equal((await a.action((e) => e.origin?.clientId === "ca" && e.origin.clientSeq === seq)).rejectionReason, undefined);
      await watcher.action((e) => e.action.type === "session/inputNeededRemoved" && e.action.id === clientInputId(reg.chat, "ct1"));

      // State rebuilt from the watcher's envelopes equals fresh snapshots.
      let session = first.session.state as SessionState;
      for (const x of watcher.actions(reg.session)) if (x.rejectionReason === undefined && x.serverSeq > first.session.fromSeq) session = reduceSession(session, x.action);
      const chat = { ...(first.chat.state as Json), queuedMessages: [], rev: 0 } as unknown as Chat;
      for (const x of watcher.actions(reg.chat)) if (x.rejectionReason === undefined && x.serverSeq > first.chat.fromSeq) reduceChat(chat, x.action);
      const fresh = await snapshots(watcher, reg);
      assert.deepEqual(session.inputNeeded, fresh.session.state.inputNeeded);
      assert.deepEqual(session.activeClients, fresh.session.state.activeClients);
      const done = toolOf(fresh.chat.state.activeTurn);
      assert.deepEqual(toolOf(chat.activeTurn as unknown as Json), done);
      assert.deepEqual([done.status, done.success, done.content], ["completed", true, [{ type: "text", text: "hello" }]]);
      assert.deepEqual([...watcher.invalid, ...a.invalid, ...other.invalid], []);
      a.close();
      other.close();
      watcher.close();
      be.close();
    },
    { home },
  );
});

test("a restored client call whose client never returns settles with its turn", async () => {
  const home = tempHome();
  const reg = await callInterruptedByRestart(home);
  await withHost(
    async (h: HostHandle) => {
      const { be } = await FakeBackend.session(h, hello);
      const { c } = await AhpClient.init(h, [reg.session, reg.chat], "watcher");
      // A client with the same ID but without the tool does not take the call over.
      const { c: a } = await AhpClient.init(h, [reg.session], "ca");
      const seq = a.dispatch(reg.session, setClient("ca", [{ name: "other" }]));
      assert.equal((await a.action((e) => e.origin?.clientId === "ca" && e.origin.clientSeq === seq)).rejectionReason, undefined);
      be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
      const end = await c.action((e) => e.channel === reg.chat && (e.action.type === "chat/error" || e.action.type === "chat/turnComplete"));
      assert.equal(end.action.turnId, "t1");
      const fresh = await snapshots(c, reg);
      const tc = toolOf((fresh.chat.state.turns as Json[]).at(-1)!);
      assert.deepEqual([tc.status, tc.reason], ["cancelled", "skipped"]);
      assert.equal(fresh.session.state.inputNeeded, undefined);
      assert.equal(c.actions(reg.session).some((e) => e.action.type === "session/inputNeededSet"), false);
      assert.deepEqual([...c.invalid, ...a.invalid], []);
      a.close();
      c.close();
      be.close();
    },
    { home },
  );
});
