/**
 * A session write the file system refuses keeps its errno code (only a known, fixable one; never the message or
 * path) from the store up to the turn's failure message. The disk refuses through the store's fsync hook here (a
 * real fsync can fail `ENOSPC` or `EIO` on writeback); test/hardening/storage-errors.test.ts does it with a real limit.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { Agent } from "../../src/runtime/agent.js";
import { terminalEvent } from "../../src/runtime/session/project.js";
import { admissionFailure } from "../../src/runtime/session/deps.js";
import type { AdmissionError } from "../../src/runtime/session/types.js";
import { SessionError, SessionStore, storageCause, storageProblem } from "../../src/store/sessions/index.js";
import { syncData } from "../../src/store/sessions/fdio.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { fakeSettings } from "../turns/helpers.js";

const errno = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`${code}: xyzzy-detail, write '/secret/path'`), { code });

it("keeps only known, fixable errno codes, and names each with a fixed sentence", () => {
  for (const code of ["ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EACCES", "EPERM", "EIO", "EMFILE", "ENFILE"]) {
    assert.equal(storageCause(errno(code)), code);
    const text = storageProblem(code) ?? "";
    assert.ok(text.includes(`(${code})`), text);
    assert.doesNotMatch(text, /secret|xyzzy/);
  }
  assert.equal(storageCause(errno("ENOENT")), undefined);
  assert.equal(storageCause(new Error("no code")), undefined);
  assert.equal(storageCause("ENOSPC"), undefined);
  assert.equal(storageCause(null), undefined);
  assert.equal(storageCause(new SessionError("unavailable", "EROFS")), "EROFS");
  assert.equal(storageCause(new SessionError("unavailable")), undefined);
  assert.equal(storageProblem(undefined), undefined);
  assert.equal(storageProblem("toString"), undefined, "only the table's own keys");
  assert.equal(storageProblem("ENOENT"), undefined);
});

it("a create whose fsync fails ENOSPC rejects with that cause and removes the new file", async () => {
  const home = mkdtempSync(join(tmpdir(), "sc-home-"));
  const store = new SessionStore({ home, syncData: () => Promise.reject(errno("ENOSPC")) });
  await assert.rejects(store.create(home), (e: unknown) => e instanceof SessionError && e.code === "unavailable" && e.storage === "ENOSPC");
  assert.deepEqual(readdirSync(join(home, "sessions")), []);
  rmSync(home, { recursive: true, force: true });
});

it("an append whose fsync fails EIO rejects with that cause, and so does every later one", async () => {
  const home = mkdtempSync(join(tmpdir(), "sc-home-"));
  let broken = false;
  const store = new SessionStore({ home, syncData: (fd) => (broken ? Promise.reject(errno("EIO")) : syncData(fd)) });
  const h = await store.create(home);
  broken = true;
  const failed = (e: unknown): boolean => e instanceof SessionError && e.storage === "EIO";
  await assert.rejects(h.writer.append({ kind: "user", turn_id: "t1", text: "one" }, { sync: true }), failed);
  await assert.rejects(h.writer.append({ kind: "user", turn_id: "t2", text: "two" }, { sync: true }), failed);
  await h.release().catch(() => undefined);
  rmSync(home, { recursive: true, force: true });
});

it("a turn whose user record cannot be made durable fails `persistence` with the cause and fix in its message", async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "sc-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "sc-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify(fakeSettings(fake.baseUrl)));
  let broken = false;
  const store = new SessionStore({ home, syncData: (fd) => (broken ? Promise.reject(errno("ENOSPC")) : syncData(fd)) });
  const h = await store.create(cwd);
  broken = true;
  const agent = new Agent({ home, cwd, env: { PATH: process.env["PATH"], MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" } });
  try {
    const out = await agent.runTurn({
      turnId: "t1",
      sessionId: h.id,
      writer: h.writer,
      history: null,
      cwd,
      prompt: "hello",
      signal: new AbortController().signal,
      noTools: true,
      sink: { delta: () => true, event: () => undefined },
    });
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "persistence");
    assert.equal(out.message, "ENOSPC");
    const ev = terminalEvent({ sessionId: h.id, turnId: "t1" }, out, undefined) as { type: string; code: string; message: string };
    assert.equal(ev.type, "turn_failed");
    assert.equal(ev.code, "internal_error");
    assert.equal(ev.message, "the session could not be written to disk: the disk holding Berth's home (MC_HOME) is full (ENOSPC); free some space and retry");
    // Without a known cause the message stays the fixed one.
    const plain = terminalEvent({ sessionId: h.id, turnId: "t1" }, { ...out, message: "EWHATEVER" }, undefined) as { message: string };
    assert.equal(plain.message, "the session could not be written to disk");
  } finally {
    await h.release().catch(() => undefined);
    await agent.close();
    await fake.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(cwd, { recursive: true, force: true });
  }
});

it("a turn that cannot be admitted says why (a lock, an unreadable file, a takeover, a close), not 'internal error'", () => {
  const ref = { sessionId: "s1", turnId: "t1" };
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 };
  const message = (a: AdmissionError): string => {
    const ev = terminalEvent(ref, { status: "failed", assistantText: "", ...admissionFailure(a), usage }, undefined) as { type: string; code: string; message: string };
    assert.equal(ev.type, "turn_failed");
    return `${ev.code}: ${ev.message}`;
  };
  assert.equal(message("busy"), "internal_error: the session's file is locked by another Berth process; try again in a few seconds, or continue the session where it is open");
  assert.match(message("unavailable"), /^internal_error: the session's file cannot be read \(missing, unreadable or damaged\); check the sessions folder/);
  assert.match(message("lost"), /^internal_error: another Berth process took this session over/);
  assert.equal(message("closed"), "internal_error: the session was closed before the turn could start");
  assert.equal(message("history_incomplete"), "history_limit: the session history is too large to load; clear the session or start a new one");
  // Codes that only a bug produces keep the fixed text.
  assert.equal(message("internal"), "internal_error: internal error");
  assert.equal(message("invalid_record"), "internal_error: internal error");
});
