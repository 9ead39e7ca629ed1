/**
 * Issue 18, daemon/host findings: no single message kills the daemon, nothing hostile is stored
 * before it is bounded, and replay shows what was sent live. Each test is named after its finding.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, statSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { withBerth } from "./berth-rig.js";
import { startHost } from "../../src/protocols/host/host.js";
import { ActionLog } from "../../src/protocols/host/action-log.js";
import { REPLAY_BYTES_LIMIT } from "../../src/protocols/host/model.js";
import { localDirectoryFromUri } from "../../src/store/host/working-dir.js";
import { MAX_INBOUND_DEPTH } from "../../src/protocols/host/inbound.js";

const nested = (depth: number): unknown => JSON.parse(deepText(depth));
/** Nested arrays as JSON text (JSON.stringify itself overflows the stack on such values). */
const deepText = (depth: number): string => "[".repeat(depth) + "]".repeat(depth);

/** The host still serves: a fresh backend registers and an AHP client lists sessions. */
async function stillServing(h: Parameters<Parameters<typeof withHost>[0]>[0], tag: string): Promise<void> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: `alive-${tag}` });
  assert.equal(reg.type, "registered");
  const { c } = await AhpClient.init(h);
  assert.ok((await c.request("listSessions", { channel: "ahp-root://" })).result.items.length >= 1);
  c.close();
  be.close();
}

test("finding: backend event frame with event {} or [] killed the daemon (TypeError in applyEvent)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "empty-event" });
    for (const event of [{}, [], { type: 5 }, { type: "__proto__" }, { type: "constructor" }]) {
      be.send({ type: "event", session: reg.session, event });
      const err = await be.nextType("error");
      assert.equal(err.code, "validation_error");
      assert.match(err.message, /event refused: (event payload|unknown event type)/);
    }
    assert.equal(be.closed, false, "an unsequenced refusal keeps the connection");
    await stillServing(h, "a");
  }));

test("finding: backend input_resolved nested ~5,000 levels killed the daemon in JSON.stringify (ActionLog.publish)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "deep", inputCapabilities: { freeform: true } });
    const { c } = await AhpClient.init(h, [reg.session, reg.chat]);
    const seq = h.state.serverSeq;
    be.raw(`{"type":"event","session":${JSON.stringify(reg.session)},"event":{"type":"input_resolved","requestId":"q","response":"accept","answers":{"a":${deepText(5000)}}}}\n`);
    const err = await be.nextType("error");
    assert.equal(err.code, "bad_frame");
    assert.equal(err.message, `frame refused: message nests deeper than ${MAX_INBOUND_DEPTH} levels`);
    await be.waitClosed();
    assert.equal(h.state.serverSeq, seq, "nothing was published");
    assert.equal(c.actions().some((e) => JSON.stringify(e).length > 10_000), false);
    await stillServing(h, "b");
    c.close();
  }));

test("finding: inbound depth is bounded exactly (at the limit accepted, one past refused)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "depth-edge" });
    // frame {1} → event {2} → input... use a ping id: frame object is depth 1, so id may nest LIMIT-1 more.
    be.send({ type: "ping", id: nested(MAX_INBOUND_DEPTH - 1) });
    assert.equal((await be.nextType("pong")).type, "pong");
    be.send({ type: "ping", id: nested(MAX_INBOUND_DEPTH) });
    assert.equal((await be.nextType("error")).code, "bad_frame");
    void reg;
    const { c } = await AhpClient.init(h);
    const ok = await c.request("ping", { x: nested(MAX_INBOUND_DEPTH - 2) });
    assert.equal(ok.result, null);
    // A refused message is not read further, so its id is not trusted: the error answers id null.
    c.ws.send(`{"jsonrpc":"2.0","id":99,"method":"ping","params":{"x":${deepText(MAX_INBOUND_DEPTH - 1)}}}`);
    await until(() => c.notes.some((n) => n.error && n.id === null), 3000, "the refusal");
    const refusal = c.notes.find((n) => n.error && n.id === null);
    assert.equal(refusal?.error.code, -32600);
    assert.match(refusal?.error.message, /nests deeper than 64 levels/);
    c.close();
  }));

test("finding: a deeply nested dispatchAction stored in the replay ring poisoned every later reconnect", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "poison" });
    const { c } = await AhpClient.init(h, [reg.session, reg.chat]);
    const seq = h.state.serverSeq;
    c.ws.send(`{"jsonrpc":"2.0","method":"dispatchAction","params":{"channel":${JSON.stringify(reg.session)},"clientSeq":1,"action":{"type":"session/titleChanged","title":"t","deep":${deepText(5000)}}}}`);
    await until(() => c.notes.some((n) => n.error && n.id === null), 3000, "the refusal");
    c.clientSeq = 1;
    c.dispatch(reg.session, { type: "session/titleChanged", title: "after" });
    await c.action((e) => e.action.type === "session/titleChanged" && e.action.title === "after");
    const c2 = await AhpClient.open(h);
    const r = await c2.request("reconnect", { clientId: "c2", lastSeenServerSeq: seq, subscriptions: [reg.session] });
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    assert.equal(r.result.type, "replay");
    assert.deepEqual(r.result.actions.map((e: Json) => e.action.title), ["after"]);
    // Directly: an action that cannot be serialized consumes no sequence number and leaves no trace.
    const log = new ActionLog(() => {});
    log.publish("ch", { type: "a" });
    const cyclic: Json = { type: "b" };
    cyclic.self = cyclic;
    assert.throws(() => log.publish("ch", cyclic));
    assert.equal(log.serverSeq, 1);
    log.publish("ch", { type: "c" });
    assert.deepEqual(log.replaySince(0, new Set(["ch"]))!.map((e) => [e.serverSeq, e.action.type]), [[1, "a"], [2, "c"]]);
    c.close();
    c2.close();
    be.close();
  }));

test("finding: replay ring was bounded by count, not bytes (300 x 1 MiB rejected actions held +345 MB)", () => {
  const log = new ActionLog(() => {});
  const big = "x".repeat(1024 * 1024);
  for (let i = 0; i < 300; i++) log.publish("ch", { type: "session/titleChanged", title: big }, { clientId: "c", clientSeq: i }, "refused");
  assert.ok(log.replayBytes <= REPLAY_BYTES_LIMIT, `ring holds ${log.replayBytes} bytes`);
  assert.ok(log.replayBytes > REPLAY_BYTES_LIMIT - 2 * big.length, "the ring still holds what fits");
  // The oldest envelopes are gone, so a reconnect from 0 answers "too old" (snapshot), never a partial replay.
  assert.equal(log.replaySince(0, new Set(["ch"])), null);
  assert.equal(log.replaySince(299, new Set(["ch"]))!.length, 1);
});

test("finding: file:// working directories were not decoded, their host ignored, nonexistent ones accepted", () => {
  const dir = mkdtempSync(join(tmpdir(), "bh-wd with space-"));
  const file = join(dir, "f.txt");
  writeFileSync(file, "x");
  const href = pathToFileURL(dir).href;
  assert.ok(href.includes("%20"));
  assert.deepEqual(localDirectoryFromUri(href), { ok: true, path: dir });
  assert.deepEqual(localDirectoryFromUri(href.replace("file://", "file://localhost")), { ok: true, path: dir });
  const refused = (u: unknown, re: RegExp) => {
    const r = localDirectoryFromUri(u);
    assert.equal(r.ok, false, String(u));
    if (!r.ok) assert.match(r.error, re);
  };
  refused("file://evil.example/etc", /names another host/);
  refused("file://[bad", /not a valid URI/);
  refused(pathToFileURL(join(dir, "missing")).href, /does not exist/);
  refused(pathToFileURL(file).href, /is not a directory/);
  refused("https://example.com/x", /not a file:\/\/ URI/);
  refused("file:///a%2Fb", /invalid path/);
  refused(7, /must be a file:\/\/ URI string/);
  refused("file://" + "a".repeat(100_000), /…/);
  assert.ok(JSON.stringify(localDirectoryFromUri("file://" + "a".repeat(100_000))).length < 400, "the error does not echo unbounded input");
});

test("finding: createSession with workingDirectories [\"file://[bad\"] killed berth daemon --berth-runtime", () =>
  withBerth(async ({ h, cwd }) => {
    const { c } = await AhpClient.init(h);
    const r = await c.request("createSession", { channel: "ahp-session:/bad-wd", provider: "berth", workingDirectories: ["file://[bad"] });
    assert.equal(r.error?.data?.outcome, "rejected");
    assert.match(r.error.message, /not a valid URI/);
    const r2 = await c.request("createSession", { channel: "ahp-session:/evil-wd", provider: "berth", workingDirectories: ["file://evil.example/etc"] });
    assert.match(r2.error.message, /names another host/);
    const ok = await c.request("createSession", { channel: "ahp-session:/good-wd", provider: "berth", workingDirectories: [pathToFileURL(cwd).href] });
    assert.equal(ok.result, null, JSON.stringify(ok.error));
    c.close();
  }));

test("finding: AHP error messages echoed client input unbounded (100 KB method name -> 100 KB error)", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const r = await c.request("m".repeat(100_000));
    assert.equal(r.error.code, -32601);
    assert.ok(r.error.message.length < 100, r.error.message.slice(0, 120));
    const s = await c.request("subscribe", { channel: "ahp-session:/" + "z".repeat(100_000) });
    // The refusal says why (channel-refusals.ts), quoting at most 64 characters of the URI.
    assert.ok(s.error.message.length < 300, s.error.message);
    assert.ok((s.error.message.match(/z/g) ?? []).length <= 64);
    // JSON-RPC requires a response to carry the request's id, so ids are echoed as sent (no
    // amplification); messages never quote more than 64 characters of input.
    const r2 = await c.request("createChat", { channel: "ahp-session:/" + "q".repeat(100_000), chat: "ahp-chat:/x" });
    assert.ok(JSON.stringify(r2.error).length < 400, "createChat's refusal is bounded");
    c.close();
  }));

test("finding: host/token was followed through a symlink and its target chmodded", async () => {
  const home = mkdtempSync(join(tmpdir(), "bh-tok-"));
  mkdirSync(join(home, "host"), { recursive: true, mode: 0o700 });
  const target = join(mkdtempSync(join(tmpdir(), "bh-tok-target-")), "victim");
  writeFileSync(target, "a".repeat(40) + "\n", { mode: 0o644 });
  chmodSync(target, 0o644);
  symlinkSync(target, join(home, "host", "token"));
  await assert.rejects(startHost({ home, log: () => {} }), /token.*symbolic link; refusing to use it as the host token \(remove it/);
  assert.equal(statSync(target).mode & 0o777, 0o644, "the link's target was not chmodded");
  // Removing the link (as the message says) lets the daemon start with a fresh owner-only token.
  unlinkSync(join(home, "host", "token"));
  const h = await startHost({ home, log: () => {} });
  try {
    assert.notEqual(h.token, "a".repeat(40));
    assert.equal(lstatSync(join(home, "host", "token")).mode & 0o777, 0o600);
  } finally {
    await h.close();
  }
});

test("finding: lock and owner files followed the umask; they are owner-only", async () => {
  const old = process.umask(0);
  try {
    const home = mkdtempSync(join(tmpdir(), "bh-umask-"));
    const h = await startHost({ home, log: () => {} });
    try {
      assert.equal(statSync(join(h.stateDir, "daemon.owner")).mode & 0o777, 0o600);
      assert.equal(statSync(join(h.stateDir, "daemon.lock")).mode & 0o777, 0o700);
      assert.equal(statSync(join(h.stateDir, "token")).mode & 0o777, 0o600);
    } finally {
      await h.close();
    }
  } finally {
    process.umask(old);
  }
});
