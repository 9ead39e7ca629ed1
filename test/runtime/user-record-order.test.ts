/**
 * The user record is durable before the provider can act on the request, while the connection and the request head
 * go out in parallel with its write and fsync (issue 19). A loopback provider observes both: the head arrives while
 * the session's append lock is held (so the record cannot have been written), the body completes only once the lock
 * is released, and at that moment the session file already holds the user record. With a slow fsync (the store's
 * injected sync holds the real one back), the record is in the file but the request stays incomplete until the fsync
 * resolved: being written is not enough.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { fdatasync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "../../src/runtime/agent.js";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import { SessionPaths } from "../../src/store/sessions/paths.js";
import { chatSse } from "../helpers/chat-sse.js";

interface Seen {
  headAt: number;
  bodyDone: boolean;
  fileAtBodyEnd: string;
}

test("the provider receives the request head before the user record is written, and the complete body only after it is durable", { timeout: 60_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "uro-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "uro-cwd-"));
  let sessionFile = "";
  const seen: Seen[] = [];
  let onHead: (() => void) | null = null;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const s: Seen = { headAt: seen.length, bodyDone: false, fileAtBodyEnd: "" };
    seen.push(s);
    onHead?.();
    req.resume();
    req.on("end", () => {
      s.bodyDone = true;
      s.fileAtBodyEnd = readFileSync(sessionFile, "utf8");
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse("hello"));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  writeFileSync(
    join(home, "settings.json"),
    JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }),
  );
  const env = { PATH: process.env["PATH"], MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  // The writer waits as long as it takes for the append lock (a live holder keeps it fresh below).
  const store = new SessionStore({ home, locks: { writerWaitMs: 600_000 } });
  const agent = new Agent({ home, cwd, env });
  const handle = await store.create(cwd);
  sessionFile = new SessionPaths(home).data(handle.id);
  // Hold the session's append lock like a live reader would (mkdir lock, mtime refreshed), so the user record's
  // batch cannot be written until the test lets go.
  const lockDir = new SessionPaths(home).append(handle.id);
  mkdirSync(lockDir, { mode: 0o700 });
  const refresh = setInterval(() => utimesSync(lockDir, new Date(), new Date()), 250);
  const headArrived = new Promise<void>((r) => (onHead = r));
  const events: RuntimeEvent[] = [];
  let deltas = "";
  const outcome = agent.runTurn({
    turnId: "t1",
    sessionId: handle.id,
    writer: handle.writer,
    history: null,
    cwd,
    prompt: "order please",
    signal: new AbortController().signal,
    noTools: true,
    sink: {
      delta: (t) => {
        deltas += t;
        return true;
      },
      event: (e) => void events.push(e),
    },
  });
  try {
    await headArrived;
    // The head is there while the record cannot have been written: setup overlapped the write.
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.bodyDone, false, "the complete request must wait for the durable user record");
    assert.doesNotMatch(readFileSync(sessionFile, "utf8"), /"kind":"user"/);
    assert.equal(events.length, 0, "nothing reaches the client before the user record is durable");
  } finally {
    clearInterval(refresh);
    rmdirSync(lockDir);
  }
  const out = await outcome;
  assert.equal(out.status, "completed");
  assert.equal(deltas, "hello");
  assert.equal(seen[0]?.bodyDone, true);
  const lines = (seen[0]?.fileAtBodyEnd ?? "").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
  const user = lines.find((r) => r["kind"] === "user");
  assert.equal(user?.["text"], "order please", "the user record is on disk when the provider gets the whole request");
  await handle.release();
  await agent.close();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(home, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
});

test("a user record that cannot be written fails the turn `persistence` and the provider never receives a complete request", { timeout: 60_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "uro-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "uro-cwd-"));
  let complete = 0;
  let heads = 0;
  const server = createServer((req, res) => {
    heads++;
    req.resume();
    req.on("end", () => {
      complete++;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse("should not happen"));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  writeFileSync(
    join(home, "settings.json"),
    JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }),
  );
  const env = { PATH: process.env["PATH"], MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  // A live holder keeps the append lock past the writer's (short) wait: the user record's batch fails `busy`.
  const store = new SessionStore({ home, locks: { writerWaitMs: 50 } });
  const agent = new Agent({ home, cwd, env });
  const handle = await store.create(cwd);
  const sessionFile = new SessionPaths(home).data(handle.id);
  const lockDir = new SessionPaths(home).append(handle.id);
  mkdirSync(lockDir, { mode: 0o700 });
  const refresh = setInterval(() => utimesSync(lockDir, new Date(), new Date()), 250);
  const events: RuntimeEvent[] = [];
  let deltas = "";
  try {
    const out = await agent.runTurn({
      turnId: "t1",
      sessionId: handle.id,
      writer: handle.writer,
      history: null,
      cwd,
      prompt: "never sent",
      signal: new AbortController().signal,
      noTools: true,
      sink: {
        delta: (t) => {
          deltas += t;
          return true;
        },
        event: (e) => void events.push(e),
      },
    });
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "persistence");
  } finally {
    clearInterval(refresh);
    rmdirSync(lockDir);
  }
  assert.equal(complete, 0, "no complete request reached the provider");
  assert.ok(heads <= 1);
  assert.equal(deltas, "");
  assert.deepEqual(events, []);
  const text = readFileSync(sessionFile, "utf8");
  assert.doesNotMatch(text, /"kind":"user"/);
  assert.doesNotMatch(text, /"kind":"terminal"/);
  await handle.release();
  await agent.close();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(home, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
});

test("the complete request reaches the provider only after the user record's fsync resolved, not merely its write", { timeout: 60_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "uro-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "uro-cwd-"));
  // Arrival order on one timeline: the fsync hook and the provider both append to it.
  const order: string[] = [];
  let onHead: (() => void) | null = null;
  const server = createServer((req, res) => {
    order.push("head");
    onHead?.();
    req.resume();
    req.on("end", () => {
      order.push("body complete");
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse("hello"));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  writeFileSync(
    join(home, "settings.json"),
    JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }),
  );
  const env = { PATH: process.env["PATH"], MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  // A slow disk: every session fsync after the header's is held until the test lets it go, then really runs.
  let hold = false;
  let letGo: (() => void) | null = null;
  let syncWaiting: (() => void) | null = null;
  const syncData = async (fd: number): Promise<void> => {
    if (hold) {
      order.push("fsync started");
      syncWaiting?.();
      await new Promise<void>((r) => (letGo = r));
    }
    await new Promise<void>((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
    if (hold) order.push("fsync resolved");
  };
  const store = new SessionStore({ home, syncData });
  const agent = new Agent({ home, cwd, env });
  const handle = await store.create(cwd);
  const sessionFile = new SessionPaths(home).data(handle.id);
  hold = true;
  const headArrived = new Promise<void>((r) => (onHead = r));
  const fsyncStarted = new Promise<void>((r) => (syncWaiting = r));
  let deltas = "";
  const outcome = agent.runTurn({
    turnId: "t1",
    sessionId: handle.id,
    writer: handle.writer,
    history: null,
    cwd,
    prompt: "durable first",
    signal: new AbortController().signal,
    noTools: true,
    sink: {
      delta: (t) => {
        deltas += t;
        return true;
      },
      event: () => undefined,
    },
  });
  await Promise.all([headArrived, fsyncStarted]);
  // The record is written (visible in the file) but not yet durable: the request must still be incomplete.
  assert.match(readFileSync(sessionFile, "utf8"), /"kind":"user"/);
  await new Promise<void>((r) => setImmediate(r));
  assert.ok(!order.includes("body complete"), `the provider got the whole request before the fsync resolved: ${order.join(", ")}`);
  hold = false;
  (letGo as (() => void) | null)?.();
  order.push("fsync released");
  const out = await outcome;
  assert.equal(out.status, "completed");
  assert.equal(deltas, "hello");
  assert.ok(order.indexOf("fsync released") < order.indexOf("body complete"), order.join(", "));
  await handle.release();
  await agent.close();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(home, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
});
