/**
 * Seeded mutation fuzzers for the daemon's two hostile-input doors: the backend socket and AHP.
 * Valid frames/messages from a small corpus are mutated (values swapped for odd types, keys
 * dropped, deep nesting, text-level edits) and sent on many connections. Afterwards the host
 * must still serve, must have logged no internal error (isolation must not hide a bug), and every
 * reply must be a well-formed frame. `FUZZ_SEED` / `FUZZ_COUNT` reproduce or lengthen a run
 * (`npm run fuzz` runs a long one).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { prng } from "../helpers/prng.js";
import { mutator, pick } from "../helpers/mutate.js";
import { AhpClient, FakeBackend, tempHome, until, type Json } from "./helpers.js";
import { gif, jpeg, vp8l, vp8x, webp } from "./image-builders.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const COUNT = Number(process.env.FUZZ_COUNT ?? 1500);

const { mutateText } = mutator({ extraKeys: ["extra", "type", "session", "event", "chat", "id"], textEditRate: 0.15 });

async function fuzzHost(fn: (h: HostHandle) => Promise<void>): Promise<string[]> {
  const logs: string[] = [];
  const h = await startHost({ home: tempHome(), log: (m) => logs.push(m) });
  try {
    await fn(h);
    if (process.env.FUZZ_VERBOSE) process.stderr.write(`fuzz: serverSeq ${h.state.serverSeq}, sessions ${h.state.sessions.size}, log lines ${logs.length}\n`);
    // Still serving: a clean backend registers and a client sees it.
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "after-fuzz" });
    assert.equal(reg.type, "registered", `seed ${SEED}: host stopped registering backends`);
    const { c } = await AhpClient.init(h);
    assert.ok((await c.request("listSessions", { channel: "ahp-root://" })).result.items.length >= 1);
    c.close();
    be.close();
  } finally {
    await h.close();
  }
  return logs;
}

const ev = (type: string, extra: Json = {}): Json => ({ type, ...extra });
const EVENTS: Json[] = [
  ev("user_message", { text: "hi" }),
  ev("agent_started", { turnId: "T1" }),
  ev("text_delta", { text: "w " }),
  ev("thinking_delta", { text: "hm" }),
  ev("tool_started", { toolCallId: "tc1", toolName: "bash", input: "{}" }),
  ev("tool_completed", { toolCallId: "tc1", output: "ok", isError: false }),
  ev("tool_confirmation_requested", { toolCallId: "tc2", toolName: "write", title: "Write", options: [{ id: "a", label: "Allow", kind: "approve" }] }),
  ev("tool_confirmation_resolved", { toolCallId: "tc2", approved: true, selectedOptionId: "a" }),
  ev("tool_result_confirmation_requested", { toolCallId: "tc1", output: "x" }),
  ev("tool_result_confirmation_resolved", { toolCallId: "tc1", approved: false }),
  ev("input_requested", { request: { id: "q1", message: "?", questions: [{ id: "a", kind: "text", message: "A?" }] } }),
  ev("input_updated", { request: { id: "q1", message: "??" } }),
  ev("input_snapshot", { requests: [] }),
  ev("input_resolved", { requestId: "q1", response: "accept", answers: { a: { state: "submitted", value: { kind: "text", value: "v" } } } }),
  ev("usage", { inputTokens: 1, outputTokens: 2 }),
  ev("title_changed", { title: "T" }),
  ev("config_changed", { model: { provider: "p", id: "m" } }),
  ev("turns_loaded", { turns: [{ id: "h1", userText: "q", responseText: "a" }] }),
  ev("settled", { cancelled: false }),
  // v10–v14 (managed invocations, source reconciliation, identity image).
  ev("invocation_boundary", { commandId: "c1", phase: "retired", binding: { span: "s" } }),
  ev("invocation_user_message", { commandId: "c1", text: "q", turnId: "T2" }),
  ev("invocation_outcome", { commandId: "c1", target: { turnId: "T1" }, outcome: "succeeded", delivery: { state: "delivered" } }),
  ev("invocation_observation_cut", { sourceEpoch: "e", activeSpan: null, sourceIdle: true }),
  ev("source_turn", { sourceId: "src-1", active: false, historyOnly: true, turn: { id: "s1", userText: "q", responseText: "a" } }),
  ev("source_turn_resources", { sourceId: "src-1", active: false, historyOnly: true, resources: [{ session: "x", index: 0, mimeType: "text/plain", digest: `sha256:${"0".repeat(64)}`, text: "{}" }] }),
  ev("profile_image_changed", { image: { mimeType: "image/gif", data: "R0lGODlhAQABAAAAACw=", width: 1, height: 1 } }),
  ev("profile_image_changed", { image: { mimeType: "image/gif", data: gif(2, 3).toString("base64"), width: 2, height: 3 } }),
  ev("profile_image_changed", { image: { mimeType: "image/jpeg", data: jpeg(2, 3).toString("base64"), width: 2, height: 3 } }),
  ev("profile_image_changed", { image: { mimeType: "image/webp", data: webp(vp8x(2, 3), vp8l(2, 3)).toString("base64"), width: 2, height: 3 } }),
  // v6 resource actions of the newest families (status flags, working directories, customizations, 0.9 chat families).
  ev("resource_action", { action: { type: "session/isReadChanged", isRead: true } }),
  ev("resource_action", { action: { type: "session/isArchivedChanged", isArchived: false } }),
  ev("resource_action", { action: { type: "session/workingDirectorySet", directory: "file:///w2" } }),
  ev("resource_action", { action: { type: "session/workingDirectoryReplaced", directory: "file:///w2", replacement: "file:///w3" } }),
  ev("resource_action", { action: { type: "session/customizationUpdated", customization: { type: "plugin", id: "p1", uri: "file:///p1", name: "P", children: [{ type: "skill", id: "k1", uri: "file:///k1", name: "K" }] } } }),
  ev("resource_action", { action: { type: "session/customizationToggled", id: "k1", enablement: [{ kind: "workspace", uri: "file:///w", enabled: false }] } }),
  ev("resource_action", { action: { type: "session/customizationRemoved", id: "k1" } }),
  ev("resource_action", { action: { type: "session/chatsReordered", chats: ["ahp-chat:/x"] } }),
  ev("resource_action", { channel: "ahp-chat:/x", action: { type: "chat/backgroundWorkSet", work: { id: "w", kind: "shell", label: "l", command: "c" } } }),
  ev("resource_action", { action: { type: "chat/changesetsChanged", changesets: [] } }),
  ev("resource_action", { action: { type: "chat/turnResume", turnId: "T1" } }),
  ev("settled", { cancelled: false, error: "e", resumable: true }),
];

test("backend socket mutation fuzz: no frame kills or wedges the host", { timeout: 300_000 }, async () => {
  const r = prng(SEED);
  const logs = await fuzzHost(async (h) => {
    const perConn = 25;
    for (let n = 0; n < COUNT; n += perConn) {
      const version = 1 + Math.floor(r() * 14);
      const provider = r() < 0.3 && version >= 3;
      const be = await FakeBackend.connect(h.backendSocket);
      const hello: Json = provider
        ? { type: "provider_hello", protocolVersion: version, instanceId: "pm", providers: [{ id: `p${n}`, displayName: "P" }] }
        : {
            type: "hello",
            protocolVersion: version,
            instanceId: "i",
            provider: "pi",
            sourceId: `src-${n % 40}`,
            ...(version >= 2 ? { inputCapabilities: { freeform: true } } : {}),
            ...(version >= 3 ? { chatCapabilities: { create: true, dispose: true, ...(version >= 10 ? { managedInvocations: true } : {}) } } : {}),
            ...(version >= 4 ? { toolCapabilities: { confirmations: true } } : {}),
          };
      be.raw((r() < 0.2 ? mutateText(r, hello) : JSON.stringify(hello)) + "\n");
      let session = "";
      try {
        const reg = await be.next((f) => f.type === "registered" || f.type === "provider_registered" || f.type === "error", "registration", 5000);
        if (typeof reg.session === "string") session = reg.session;
      } catch {
        /* a mutated hello may get no answer before the handshake timeout; move on */
      }
      const frames: string[] = [];
      let seq = 1;
      for (let k = 0; k < perConn; k++) {
        const x = r();
        let f: Json;
        if (provider) {
          f = pick(r, [
            { type: "register_session", requestId: `rq${k}`, hello: { protocolVersion: version, instanceId: "i", provider: `p${n}`, sourceId: `m${k}` } },
            { type: "provider_status", ready: true },
            { type: "session_creation_failed", session: "ahp-session:/x", creationToken: "t" },
            { type: "command_result", commandId: "c", accepted: true },
            { type: "unregister_session", requestId: "u", session: "ahp-session:/x" },
          ]);
        } else if (x < 0.7) f = { type: "event", session, event: pick(r, EVENTS) };
        else if (x < 0.85) f = { type: "sequenced_event", session, sequence: seq++, event: pick(r, EVENTS) };
        else
          f = pick(r, [
            { type: "ping", id: k },
            { type: "command_result", commandId: "x", accepted: false, error: "no" },
            { type: "command_indeterminate", commandId: "x" },
            { type: "chat_event", session, chat: "ahp-chat:/x", event: pick(r, EVENTS) },
            { type: "command_handled", commandId: "x", backendInstanceId: "i", session, reason: "r" },
            { type: "source_snapshot_batch", session, batchId: "b", snapshots: [{ sourceId: "src-1", active: false, historyOnly: true, turn: { id: `b${k}`, userText: "q" } }] },
          ]);
        frames.push(r() < 0.6 ? mutateText(r, f) : JSON.stringify(f));
      }
      be.raw(frames.join("\n") + "\n");
      be.send({ type: "ping", id: "end" });
      await until(() => be.closed || be.frames.some((f) => f.type === "pong" && f.id === "end"), 10_000, `seed ${SEED}: connection ${n} answered`);
      for (const f of be.frames) assert.equal(typeof f.type, "string", `seed ${SEED}: reply without a type`);
      be.close();
    }
  });
  const bugs = logs.filter((m) => /internal error|bug:/.test(m));
  assert.deepEqual(bugs, [], `seed ${SEED}: the host hit internal errors`);
});

const RPC: Array<[string, Json]> = [
  ["ping", {}],
  ["subscribe", { channel: "ahp-root://" }],
  ["unsubscribe", { channel: "ahp-root://" }],
  ["listSessions", { channel: "ahp-root://" }],
  ["createSession", { channel: "ahp-session:/f1", provider: "prov", workingDirectories: ["file:///w"] }],
  ["disposeSession", { channel: "ahp-session:/f1" }],
  ["createChat", { channel: "ahp-session:/f1", chat: "ahp-chat:/c1" }],
  ["disposeChat", { channel: "ahp-session:/f1", chat: "ahp-chat:/c1" }],
  ["fetchTurns", { channel: "ahp-chat:/c1", limit: 5 }],
  ["reconnect", { clientId: "c", lastSeenServerSeq: 0, subscriptions: ["ahp-root://"] }],
  ["initialize", { channel: "ahp-root://", protocolVersions: ["1.0.0"], clientId: "c" }],
];
const ACTIONS: Json[] = [
  { type: "chat/turnStarted", turnId: "t1", startedAt: "2026-01-01T00:00:00.000Z", message: { text: "hi", origin: { kind: "user" } } },
  { type: "chat/turnCancelled", turnId: "t1" },
  { type: "session/titleChanged", title: "T" },
  { type: "session/configChanged", config: { thinkingLevel: "high" } },
  { type: "chat/toolCallConfirmed", turnId: "t1", toolCallId: "tc", approved: true, selectedOptionId: "a" },
  { type: "chat/inputCompleted", requestId: "q", response: "accept" },
  { type: "chat/pendingMessageSet", kind: "steering", id: "p1", message: { text: "s", origin: { kind: "user" } } },
  { type: "chat/pendingMessageRemoved", kind: "queued", id: "p1" },
  // The newest client-dispatchable families.
  { type: "session/isReadChanged", isRead: true },
  { type: "session/isArchivedChanged", isArchived: true },
  { type: "session/workingDirectorySet", directory: "file:///w2" },
  { type: "session/workingDirectoryRemoved", directory: "file:///w" },
  { type: "session/customizationToggled", id: "p1", enabled: false },
  { type: "session/mcpServerBackgroundRequested", id: "m" },
  { type: "chat/isReadChanged", isRead: false },
  { type: "chat/isArchivedChanged", isArchived: true },
  { type: "chat/workingDirectorySet", directory: "file:///w" },
  { type: "chat/draftChanged", draft: { text: "d", origin: { kind: "user" } } },
  { type: "chat/inputAnswerChanged", requestId: "q", questionId: "a", answer: { state: "skipped" } },
  { type: "chat/queuedMessagesReordered", order: ["p1"] },
  { type: "chat/turnResume", turnId: "t1" },
  { type: "chat/backgroundWorkSet", work: { id: "w", kind: "shell", label: "l", command: "c" } },
];

test("AHP mutation fuzz: no message kills the host or breaks replay", { timeout: 300_000 }, async () => {
  const r = prng(SEED ^ 0x5bd1e995);
  const logs = await fuzzHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "ahp-fuzz", inputCapabilities: { freeform: true }, toolCapabilities: { confirmations: true }, chatCapabilities: { create: true, dispose: true } });
    const prov = await FakeBackend.provider(h, 9, ["prov"]);
    // A v6 session for the families forwarded as apply_resource_action (working directories, toggles, reorders).
    const v6 = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "ahp-fuzz-6", multipleWorkingDirectories: {}, inputCapabilities: { freeform: true, drafts: true }, workingDirectories: ["file:///w"] });
    assert.equal(v6.reg.type, "registered", JSON.stringify(v6.reg));
    const channels = ["ahp-root://", reg.session, reg.chat, v6.reg.session, v6.reg.chat];
    const perConn = 50;
    for (let n = 0; n < COUNT; n += perConn) {
      const { c } = await AhpClient.init(h, channels, `fz${n}`);
      const msgs: string[] = [];
      for (let k = 0; k < perConn; k++) {
        let m: Json;
        if (r() < 0.5) {
          const [method, params] = pick(r, RPC);
          m = { jsonrpc: "2.0", id: k, method, params: { ...params, ...(params.channel && method !== "disposeSession" && r() < 0.5 ? { channel: pick(r, channels) } : {}) } };
        } else m = { jsonrpc: "2.0", method: "dispatchAction", params: { channel: pick(r, channels), clientSeq: k + 1, action: pick(r, ACTIONS) } };
        msgs.push(r() < 0.6 ? mutateText(r, m) : JSON.stringify(m));
      }
      for (const m of msgs) c.ws.send(m);
      // Backends refuse whatever commands arrive so requests settle.
      for (const f of [...be.frames, ...prov.be.frames]) if (f.type === "command" || f.type === "provider_command") (f.type === "command" ? be : prov.be).send({ type: "command_result", commandId: f.commandId, accepted: false, error: "fuzz" });
      // The v6 backend accepts what is forwarded to it about half the time, so accepted echoes are fuzzed too.
      for (const f of v6.be.frames) if (f.type === "command") v6.be.send({ type: "command_result", commandId: f.commandId, accepted: r() < 0.5, error: "fuzz" });
      be.frames.length = 0;
      prov.be.frames.length = 0;
      v6.be.frames.length = 0;
      const done = await c.request("ping", {}, 10_000).catch(() => null);
      if (!c.closed) assert.ok(done, `seed ${SEED}: connection ${n} stopped answering`);
      c.close();
    }
    // Replay covering every fuzzed envelope still answers.
    const c2 = await AhpClient.open(h);
    const rc = await c2.request("reconnect", { clientId: "z", lastSeenServerSeq: 0, subscriptions: channels });
    assert.equal(rc.error, undefined, `seed ${SEED}: reconnect failed: ${JSON.stringify(rc.error)}`);
    c2.close();
    be.close();
    prov.be.close();
    v6.be.close();
  });
  const bugs = logs.filter((m) => /internal error|bug:/.test(m));
  assert.deepEqual(bugs, [], `seed ${SEED}: the host hit internal errors`);
});
