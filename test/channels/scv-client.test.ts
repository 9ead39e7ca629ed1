/**
 * The SCV v3 client's wire rules over in-memory streams (a scripted server side): initialize and version mismatch,
 * turn following by request_id (deltas, progress, unknown event types and other requests' events ignored; the last
 * assistant.completed wins), approvals answered per auto_approve, turn.cancel once the turn id is known, error and
 * turn.failed as failed, a closed connection rejecting pending turns, an oversized frame closing the connection.
 */
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { ScvClient, ScvConnectionError, ScvRequestError } from "../../src/client/scv/client.js";

function pair(): { client: ScvClient; toClient: PassThrough; sent: Array<Record<string, unknown>>; next: () => Promise<Record<string, unknown>> } {
  const toClient = new PassThrough();
  const fromClient = new PassThrough();
  const sent: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buf = "";
  fromClient.on("data", (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      sent.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
      buf = buf.slice(i + 1);
      for (const w of waiters.splice(0)) w();
    }
  });
  let read = 0;
  const next = async (): Promise<Record<string, unknown>> => {
    while (sent.length <= read) await new Promise<void>((r) => waiters.push(r));
    return sent[read++]!;
  };
  return { client: new ScvClient(toClient, fromClient), toClient, sent, next };
}

const emit = (s: PassThrough, o: Record<string, unknown>): void => void s.write(JSON.stringify(o) + "\n");

describe("SCV client", () => {
  it("initializes with protocol 3 and refuses another version", async () => {
    const a = pair();
    const init = a.client.initialize();
    const m = await a.next();
    assert.equal(m["type"], "initialize");
    assert.equal(m["protocol_version"], 3);
    emit(a.toClient, { type: "initialized", request_id: m["request_id"], protocol_version: 3, server: { name: "s", version: "1" } });
    await init;
    const b = pair();
    const bad = b.client.initialize();
    const mb = await b.next();
    emit(b.toClient, { type: "initialized", request_id: mb["request_id"], protocol_version: 2, server: {} });
    await assert.rejects(bad, (e) => e instanceof ScvRequestError && e.code === "version_mismatch");
  });

  it("follows a turn by request_id and returns only the last assistant.completed", async () => {
    const { client, toClient, next } = pair();
    const start = client.startSession({ cwd: "/w", channel: "WeChat", noTools: false, autoApprove: true });
    const ss = await next();
    assert.deepEqual([ss["type"], ss["cwd"], ss["channel"], ss["no_tools"], ss["auto_approve"]], ["session.start", "/w", "WeChat", false, true]);
    emit(toClient, { type: "session.started", request_id: ss["request_id"], session_id: "S" });
    assert.equal(await start, "S");
    const turn = client.runTurn("S", "go", [{ kind: "image", path: "/p.jpg", name: "p.jpg", mime: "image/jpeg", size: 3 }], new AbortController().signal);
    const ts = await next();
    assert.deepEqual(ts["attachments"], [{ kind: "image", path: "/p.jpg", name: "p.jpg", mime: "image/jpeg", size: 3 }]);
    const rid = ts["request_id"];
    const ev = (o: Record<string, unknown>): void => emit(toClient, { request_id: rid, session_id: "S", turn_id: "T", ...o });
    ev({ type: "turn.started", seq: 1 });
    ev({ type: "assistant.delta", seq: 2, content: "par" });
    ev({ type: "assistant.completed", seq: 3, content: "first message" });
    ev({ type: "approval.requested", seq: 4, approval_id: "A1", call_id: "c", name: "bash" });
    const ap = await next();
    assert.deepEqual([ap["type"], ap["approval_id"], ap["approved"]], ["approval.resolve", "A1", true]);
    ev({ type: "tool.progress", seq: 5, text: "x" });
    ev({ type: "some.future.event", seq: 6 });
    emit(toClient, { type: "assistant.completed", request_id: "other", session_id: "S", content: "not ours" });
    ev({ type: "tool.completed", seq: 7, name: "chat_attach", success: true, output: JSON.stringify({ attached: { path: "/o/f.txt", name: "f.txt", size: 4, caption: "here" }, note: "n" }) });
    ev({ type: "assistant.completed", seq: 8, content: "final message" });
    ev({ type: "turn.completed", seq: 9, steps: 2 });
    assert.deepEqual(await turn, { terminal: "completed", text: "final message", files: [{ path: "/o/f.txt", name: "f.txt", size: 4, caption: "here" }] });
  });

  it("denies approvals in a session without auto_approve; turn.failed and error are failed", async () => {
    const { client, toClient, next } = pair();
    const start = client.startSession({ cwd: "/w", channel: "Feishu", noTools: true, autoApprove: false });
    const ss = await next();
    emit(toClient, { type: "session.started", request_id: ss["request_id"], session_id: "S2" });
    await start;
    const t1 = client.runTurn("S2", "x", [], new AbortController().signal);
    const r1 = (await next())["request_id"];
    emit(toClient, { type: "approval.requested", request_id: r1, session_id: "S2", approval_id: "A2" });
    assert.equal((await next())["approved"], false);
    emit(toClient, { type: "turn.failed", request_id: r1, session_id: "S2", code: "provider_error", message: "m" });
    assert.equal((await t1).terminal, "failed");
    const t2 = client.runTurn("S2", "", [], new AbortController().signal);
    const r2 = (await next())["request_id"];
    emit(toClient, { type: "error", request_id: r2, code: "invalid_request", message: "empty prompt", fatal: false });
    assert.equal((await t2).terminal, "failed");
  });

  it("sends turn.cancel once the turn id is known, and resolves cancelled", async () => {
    const { client, toClient, next } = pair();
    const ctl = new AbortController();
    const t = client.runTurn("S", "long", [], ctl.signal);
    const rid = (await next())["request_id"];
    ctl.abort(); // before turn.started: the cancel waits for the id
    emit(toClient, { type: "turn.started", request_id: rid, session_id: "S", turn_id: "T9", seq: 1 });
    const c = await next();
    assert.deepEqual([c["type"], c["session_id"], c["turn_id"]], ["turn.cancel", "S", "T9"]);
    emit(toClient, { type: "turn.cancelled", request_id: rid, session_id: "S", turn_id: "T9", seq: 2 });
    assert.equal((await t).terminal, "cancelled");
  });

  it("a closed connection rejects a pending turn; an oversized frame closes the connection", async () => {
    const a = pair();
    const t = a.client.runTurn("S", "x", [], new AbortController().signal);
    await a.next();
    a.toClient.end();
    await assert.rejects(t, ScvConnectionError);
    const b = pair();
    const t2 = b.client.runTurn("S", "x", [], new AbortController().signal);
    await b.next();
    b.toClient.write("x".repeat(8 * 1024 * 1024 + 1) + "\n");
    await assert.rejects(t2, /over 8 MiB/);
  });
});
