/**
 * Berth's runtime as provider `berth`, end to end: AHP client → host → backend socket → adapter →
 * Agent → loopback fake provider, and back.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AhpClient, berthHomeFor, until, type Json } from "./helpers.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { ended, newSession, startTurn, user, waitIdle, withBerth } from "./berth-rig.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

test("berth provider: create a session, prompt, stream, confirm and deny tools, cancel, follow up", () =>
  withBerth(async ({ h, fake, cwd }) => {
    const { c, result } = await AhpClient.init(h, ["ahp-root://"]);
    const root = result.snapshots[0].state;
    assert.deepEqual(root.agents.map((a: Json) => a.provider), ["berth"]);
    const { session, chat } = await newSession(c, "ahp-session:/berth-1", cwd);
    assert.equal(h.state.sessions.get(session)!.sourceId.startsWith("berth:"), true);

    // A prompt streams back (the fake echoes the last user text) and completes.
    startTurn(c, chat, "t1", "hello berth");
    assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete");
    const deltas = c.actions(chat).filter((e) => ["chat/responsePart", "chat/delta"].includes(e.action.type));
    assert.ok(deltas.length >= 2, "streamed in several deltas");
    const t1 = h.state.chatIndex.get(chat)!.turns.find((t) => t.id === "t1")!;
    assert.equal((t1.responseParts as Json[]).find((p) => p.kind === "markdown")!.content, "echo: hello berth");
    await c.note("root/sessionSummaryChanged", (p) => p.session === session && p.changes.title === "hello berth");

    // A mutating tool asks; approving runs it.
    fake.script([{ steps: [{ toolCall: { id: "w1", name: "write", arguments: { path: "out.txt", content: "hi" } } }] }, { steps: [{ text: "wrote it" }] }]);
    startTurn(c, chat, "t2", "write a file");
    const ready = await c.action((e) => e.action.type === "chat/toolCallReady" && e.action.turnId === "t2" && e.action.confirmed === undefined, "confirmation", 10_000);
    assert.deepEqual(JSON.parse(ready.action.toolInput), { path: "out.txt", content: "hi" });
    await c.action((e) => e.channel === session && e.action.type === "session/inputNeededSet");
    assert.equal(existsSync(join(cwd, "out.txt")), false, "nothing runs before the answer");
    c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId: "t2", toolCallId: ready.action.toolCallId, approved: true, confirmed: "user-action" });
    await c.action((e) => e.action.type === "chat/toolCallConfirmed" && e.origin?.clientId === "c1");
    const done2 = await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.turnId === "t2", "tool complete", 10_000);
    assert.equal(done2.action.result.success, true);
    assert.equal((await ended(c, "t2")).action.type, "chat/turnComplete");
    assert.equal(readFileSync(join(cwd, "out.txt"), "utf8"), "hi");

    // Denying it skips the call; the model is told and the turn goes on.
    fake.script([{ steps: [{ toolCall: { id: "w2", name: "write", arguments: { path: "no.txt", content: "x" } } }] }, { steps: [{ text: "fine" }] }]);
    startTurn(c, chat, "t3", "write another");
    const ready3 = await c.action((e) => e.action.type === "chat/toolCallReady" && e.action.turnId === "t3" && e.action.confirmed === undefined, "confirmation", 10_000);
    c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId: "t3", toolCallId: ready3.action.toolCallId, approved: false, reason: "denied" });
    assert.equal((await ended(c, "t3")).action.type, "chat/turnComplete");
    const t3 = h.state.chatIndex.get(chat)!.turns.find((t) => t.id === "t3")!;
    assert.equal(((t3.responseParts as Json[]).find((p) => p.kind === "toolCall")!.toolCall as Json).status, "cancelled");
    assert.equal(existsSync(join(cwd, "no.txt")), false);

    // Cancelling mid-stream aborts the provider request.
    fake.script([{ steps: [{ text: "first words " }, { delayMs: 5000 }, { text: "never" }] }]);
    const before = fake.requests.length;
    startTurn(c, chat, "t4", "stall");
    await c.action((e) => e.action.type === "chat/responsePart" && e.action.turnId === "t4", "first delta", 10_000);
    c.dispatch(chat, { type: "chat/turnCancelled", turnId: "t4", duration: 0 });
    assert.equal((await ended(c, "t4")).action.type, "chat/turnCancelled");
    await fake.requests[before]!.socketClosed;

    // The runtime settles the cancelled turn; a queued follow-up then runs as its own turn.
    fake.script([{ steps: [{ text: "busy " }, { delayMs: 300 }, { text: "done" }] }]);
    await waitIdle(h, session);
    startTurn(c, chat, "t5", "slow one");
    await c.action((e) => e.action.type === "chat/responsePart" && e.action.turnId === "t5", "t5 delta", 10_000);
    c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.origin?.clientId === "c1");
    assert.equal((await ended(c, "t5")).action.type, "chat/turnComplete");
    const next = await c.action((e) => e.action.type === "chat/turnStarted" && e.action.queuedMessageId === "q1", "follow-up turn", 10_000);
    assert.equal((await ended(c, next.action.turnId)).action.type, "chat/turnComplete");
    assert.deepEqual(h.state.chatIndex.get(chat)!.queuedMessages, []);

    // Steering and configuration are refused by this runtime (echoed as rejections).
    c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("x") });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.rejectionReason !== undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("berth sessions survive a host restart and keep their URI; disposal is routed to the runtime", async () => {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  const hostHome = mkdtempSync(join(tmpdir(), "bh-host-"));
  let chat = "";
  try {
    await withBerth(
      async ({ h, cwd }) => {
        const { c } = await AhpClient.init(h, []);
        ({ chat } = await newSession(c, "ahp-session:/kept", cwd));
        startTurn(c, chat, "a1", "remember me");
        await ended(c, "a1");
        c.close();
      },
      { home: hostHome, berthHome, fake },
    );
    await withBerth(
      async ({ h, fake: f }) => {
        const s = h.state.sessions.get("ahp-session:/kept")!;
        const { c } = await AhpClient.init(h, [chat]);
        await waitRoute(h, "ahp-session:/kept");
        assert.equal(s.provider, "berth");
        startTurn(c, chat, "a2", "and again");
        assert.equal((await ended(c, "a2")).action.type, "chat/turnComplete");
        // The runtime rebuilt the context from the durable Berth session.
        const body = JSON.stringify(f.requests[f.requests.length - 1]!.json);
        assert.ok(body.includes("remember me"), "history reached the provider");
        const d = await c.request("disposeSession", { channel: "ahp-session:/kept" });
        assert.equal(d.result, null);
        assert.equal(h.state.sessions.has("ahp-session:/kept"), false);
        c.close();
      },
      { home: hostHome, berthHome, fake },
    );
  } finally {
    await fake.close();
  }
});

function waitRoute(h: HostHandle, uri: string): Promise<void> {
  return until(() => h.state.sessions.get(uri)?.route !== undefined, 10_000, `${uri} re-registered`);
}
