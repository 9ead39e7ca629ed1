import { test } from "node:test";
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { dirname } from "node:path";
import { AhpClient, FakeBackend, until, withHost } from "./helpers.js";

test("v1 hello registers, echoes version, derives opaque URIs; ping/pong", () =>
  withHost(async (h) => {
    assert.equal(statSync(h.backendSocket).mode & 0o777, 0o600);
    assert.equal(statSync(dirname(h.backendSocket)).mode & 0o777, 0o700);
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "src-a", title: "A", cwd: "/secret/path" });
    assert.equal(reg.type, "registered");
    assert.equal(reg.protocolVersion, 1);
    assert.equal(reg.hostId, h.state.hostId);
    assert.match(reg.session, /^ahp-session:\//);
    assert.match(reg.chat, /^ahp-chat:\//);
    assert.ok(!reg.session.includes("src-a"));
    assert.equal(typeof reg.backendConnectionId, "string");
    assert.equal(typeof reg.sourceContinuity, "string");
    be.send({ type: "ping", id: 7 });
    assert.deepEqual(await be.nextType("pong"), { type: "pong", id: 7 });
    const { c } = await AhpClient.init(h);
    const list = await c.request("listSessions", { channel: "ahp-root://" });
    assert.equal(list.result.items.length, 1);
    assert.ok(!JSON.stringify(list.result).includes("/secret/path"));
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("versions 10-14 and 0/15 are refused with a clear error; v2+ fields gated", () =>
  withHost(async (h) => {
    for (const v of [10, 14, 0, 15]) {
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: v, sourceId: `s${v}` });
      assert.equal(reg.type, "error");
      assert.equal(reg.code, "unsupported_version");
      assert.match(reg.message, v >= 10 && v <= 14 ? /not supported by this host yet/ : /unsupported/);
      await be.waitClosed();
    }
    const { reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "g", inputCapabilities: { freeform: true } });
    assert.equal(reg.code, "validation_error");
    const r2 = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "g2", sourceAliases: ["x"] });
    assert.equal(r2.reg.code, "validation_error");
  }));

test("bad frames: oversize (never skipped), bad JSON, non-object, bad UTF-8, missing handshake", () =>
  withHost(async (h) => {
    const big = await FakeBackend.connect(h.backendSocket);
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < 16; i++) big.raw(chunk); // 16 MiB without a delimiter: already over the limit
    const e1 = await big.nextType("error", 5000);
    assert.equal(e1.code, "frame_too_large");
    await big.waitClosed();

    const cases: Array<[string | Buffer, string]> = [
      ["{not json}\n", "bad_frame"],
      ["[1,2]\n", "bad_frame"],
      [Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a]), "bad_frame"],
      [JSON.stringify({ type: "event", session: "x" }) + "\n", "handshake_required"],
    ];
    for (const [raw, code] of cases) {
      const be = await FakeBackend.connect(h.backendSocket);
      be.raw(raw);
      const e = await be.nextType("error");
      assert.equal(e.code, code);
      await be.waitClosed();
    }
    // A frame exactly at the limit (including its delimiter) is accepted as a frame (and judged on content).
    const ok = await FakeBackend.connect(h.backendSocket);
    const limit = 16 * 1024 * 1024;
    const pad = limit - 1 - JSON.stringify({ type: "ping", pad: "" }).length;
    ok.send({ type: "ping", pad: "x".repeat(pad) });
    const pong = await ok.nextType("pong", 5000);
    assert.equal(pong.type, "pong");
    ok.close();
  }));

test("a newer connection for the same sourceId fences the old one (backend_replaced)", () =>
  withHost(async (h) => {
    const a = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "same", instanceId: "i1" });
    const b = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "same", instanceId: "i2" });
    assert.equal(a.reg.session, b.reg.session);
    const e = await a.be.nextType("error");
    assert.equal(e.code, "backend_replaced");
    await a.be.waitClosed();
    // The old connection can no longer publish.
    assert.equal(h.state.sessions.get(b.reg.session)!.route!.instanceId, "i2");
    b.be.close();
  }));

test("aliases: adoption keeps the URI, conflicts are refused, aliases persist", () =>
  withHost(async (h) => {
    const a = await FakeBackend.session(h, { protocolVersion: 7, sourceId: "old-src" });
    const b = await FakeBackend.session(h, { protocolVersion: 7, sourceId: "other" });
    a.be.close();
    b.be.close();
    const adopt = await FakeBackend.session(h, { protocolVersion: 7, sourceId: "new-src", sourceAliases: ["old-src"] });
    assert.equal(adopt.reg.session, a.reg.session);
    const conflict = await FakeBackend.session(h, { protocolVersion: 7, sourceId: "third", sourceAliases: ["new-src", "other"] });
    assert.equal(conflict.reg.code, "alias_conflict");
    const dup = await FakeBackend.session(h, { protocolVersion: 7, sourceId: "fourth", sourceAliases: ["a", "a"] });
    assert.equal(dup.reg.code, "validation_error");
    adopt.be.close();
  }));

test("history turns, sourceCursor, events reduced into AHP chat state, prompt/abort commands", () =>
  withHost(async (h) => {
    const history = [
      { id: "t1", startedAt: "2026-01-01T00:00:00.000Z", userText: "q1", responseText: "a1" },
      { id: "t2", userText: "q2", responseText: "a2", cancelled: true },
    ];
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "hist", history, chatCapabilities: { pagedHistory: true } });
    assert.equal(reg.sourceCursor, "t2");
    const { c, result } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    const chatSnap = result.snapshots.find((s: any) => s.resource === reg.chat);
    assert.equal(chatSnap.state.turns.length, 2);
    assert.equal(chatSnap.state.turns[1].state, "cancelled");

    // Client starts a turn → backend receives prompt with the AHP turnId.
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "turn-9", startedAt: new Date().toISOString(), message: { text: "hello", origin: { kind: "user" } } });
    const cmd = await be.nextType("command");
    assert.equal(cmd.command.type, "prompt");
    assert.equal(cmd.command.turnId, "turn-9");
    assert.equal(cmd.chat, reg.chat);
    assert.equal(cmd.backendInstanceId, "inst-1");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const echo = await c.action((e) => e.action.type === "chat/turnStarted");
    assert.deepEqual(echo.origin, { clientId: "c1", clientSeq: 1 });
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "hello", turnId: "turn-9" } });
    be.send({ type: "event", session: reg.session, event: { type: "thinking_delta", text: "hmm" } });
    be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "Hel" } });
    be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "lo" } });
    be.send({ type: "event", session: reg.session, event: { type: "tool_started", toolCallId: "tc1", toolName: "bash", input: "{}" } });
    be.send({ type: "event", session: reg.session, event: { type: "tool_completed", toolCallId: "tc1", toolName: "bash", output: "ok", isError: false } });
    be.send({ type: "event", session: reg.session, event: { type: "usage", inputTokens: 3, outputTokens: 4 } });
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    await c.action((e) => e.action.type === "chat/turnComplete");
    const chat = h.state.chatIndex.get(reg.chat)!;
    const last = chat.turns[chat.turns.length - 1] as any;
    assert.equal(last.id, "turn-9");
    assert.equal(last.state, "complete");
    assert.equal(last.responseParts.find((p: any) => p.kind === "markdown").content, "Hello");
    assert.equal(last.responseParts.find((p: any) => p.kind === "toolCall").toolCall.status, "completed");
    assert.equal(last.usage.outputTokens, 4);
    // Only one user turn (the echo of user_message was not a second turn).
    assert.equal(c.actions(reg.chat).filter((e) => e.action.type === "chat/turnStarted").length, 1);

    // A rejected prompt completes the turn with a chat error; abort is routed.
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "turn-10", startedAt: new Date().toISOString(), message: { text: "x", origin: { kind: "user" } } });
    const cmd2 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: false, error: "busy" });
    const err = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "turn-10");
    assert.equal(err.action.error.errorType, "backend_rejected");
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "turn-11", startedAt: new Date().toISOString(), message: { text: "y", origin: { kind: "user" } } });
    const cmd3 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd3.commandId, accepted: true });
    c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "turn-11", duration: 0 });
    const abort = await be.next((f) => f.type === "command" && f.command.type === "abort");
    be.send({ type: "command_result", commandId: abort.commandId, accepted: true });
    await c.action((e) => e.action.type === "chat/turnCancelled" && e.origin?.clientSeq === 4);
    // An invalid client action is echoed with a rejectionReason.
    c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "nope", duration: 0 });
    const rej = await c.action((e) => e.rejectionReason !== undefined);
    assert.equal(rej.origin.clientSeq, 5);
    // Unknown event is refused without tearing down the dedicated connection for unsequenced frames.
    be.send({ type: "event", session: reg.session, event: { type: "nonsense" } });
    const ve = await be.nextType("error");
    assert.equal(ve.sequence, 0);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("v1 backends cannot send input events; v2 input and v4 tool confirmations round-trip", () =>
  withHost(async (h) => {
    const v1 = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "v1" });
    v1.be.send({ type: "event", session: v1.reg.session, event: { type: "input_requested", request: { id: "r", message: "?" } } });
    assert.match((await v1.be.nextType("error")).message, /requires protocol version 2/);
    v1.be.close();

    const { be, reg } = await FakeBackend.session(h, {
      protocolVersion: 4,
      sourceId: "v4",
      inputCapabilities: { freeform: true },
      toolCapabilities: { confirmations: true },
    });
    const { c } = await AhpClient.init(h, [reg.session, reg.chat]);
    be.send({ type: "event", session: reg.session, event: { type: "agent_started", turnId: "T" } });
    be.send({ type: "event", session: reg.session, event: { type: "input_requested", request: { id: "q1", message: "Pick", questions: [{ id: "a", kind: "single_select", message: "A?", options: [{ id: "o1", label: "One" }] }] } } });
    await c.action((e) => e.action.type === "session/inputNeededSet");
    assert.equal(h.state.sessionStatus(h.state.sessions.get(reg.session)!) & 24, 24);
    c.dispatch(reg.chat, { type: "chat/inputCompleted", requestId: "q1", response: "accept", answers: { a: { state: "submitted", value: { kind: "selected", value: "o1" } } } });
    const ci = await be.next((f) => f.type === "command" && f.command.type === "complete_input");
    assert.equal(ci.command.requestId, "q1");
    be.send({ type: "command_result", commandId: ci.commandId, accepted: true });
    // Barrier instead of a sleep: the host has handled the result, and anything it sent the client since is here.
    await be.roundTrip();
    await c.request("ping");
    assert.equal(c.actions(reg.chat).filter((e) => e.action.type === "chat/inputCompleted").length, 0, "not reduced before runtime resolution");
    be.send({ type: "event", session: reg.session, event: { type: "input_resolved", requestId: "q1", response: "accept", commandId: ci.commandId } });
    const done = await c.action((e) => e.action.type === "chat/inputCompleted");
    assert.equal(done.origin.clientId, "c1");
    await c.action((e) => e.action.type === "session/inputNeededRemoved");

    be.send({ type: "event", session: reg.session, event: { type: "tool_started", toolCallId: "tc", toolName: "write" } });
    be.send({ type: "event", session: reg.session, event: { type: "tool_confirmation_requested", toolCallId: "tc", input: "{\"p\":1}", title: "Write file", options: [{ id: "allow", label: "Allow", kind: "approve" }] } });
    await c.action((e) => e.action.type === "chat/toolCallReady" && e.action.confirmed === undefined);
    c.dispatch(reg.chat, { type: "chat/toolCallConfirmed", turnId: "T", toolCallId: "tc", approved: true, confirmed: "user-action", selectedOptionId: "allow" });
    const ct = await be.next((f) => f.type === "command" && f.command.type === "confirm_tool");
    assert.equal(ct.command.selectedOptionId, "allow");
    be.send({ type: "command_result", commandId: ct.commandId, accepted: true });
    await c.action((e) => e.action.type === "chat/toolCallConfirmed" && e.origin?.clientId === "c1");
    be.send({ type: "event", session: reg.session, event: { type: "tool_result_confirmation_requested", toolCallId: "tc", output: "wrote" } });
    await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.requiresResultConfirmation === true);
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: true } });
    await c.action((e) => e.action.type === "chat/turnCancelled");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("v9: command_indeterminate is never a rejection; a lost result after delivery is indeterminate", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "v9" });
    const { c } = await AhpClient.init(h, [reg.chat]);
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "a", startedAt: new Date().toISOString(), message: { text: "x", origin: { kind: "user" } } });
    const cmd = await be.nextType("command");
    be.send({ type: "command_indeterminate", commandId: cmd.commandId, error: "reconcile" });
    const e = await c.action((x) => x.action.type === "chat/error");
    assert.equal(e.action.error.errorType, "backend_indeterminate");
    // No automatic replay: no second prompt arrives (a replay would be sent before the pong).
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0);
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "b", startedAt: new Date().toISOString(), message: { text: "y", origin: { kind: "user" } } });
    await be.nextType("command");
    be.close(); // lost result after delivery
    const e2 = await c.action((x) => x.action.type === "chat/error" && x.action.turnId === "b");
    assert.equal(e2.action.error.errorType, "backend_indeterminate");
    // v1 peers may not send command_indeterminate.
    const old = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "v1x" });
    old.be.send({ type: "command_indeterminate", commandId: "z" });
    assert.equal((await old.be.nextType("error")).code, "unsupported_version");
    old.be.close();
    await until(() => true);
    c.close();
  }));
