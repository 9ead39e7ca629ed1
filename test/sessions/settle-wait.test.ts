/**
 * Two doors opening one session at the same moment, while one of them holds the writer lease only to settle the
 * turn a killed process left open (docs/sessions.md, "Crash and resume"): the other waits for that settle instead of
 * reporting the session busy. A settle-peer child (settle-peer.ts) is the first door — the store calls ACP's
 * `session/load` makes (`settledHistory`) or app-service's `session.open` (`open`) — stopped inside its settle, so the
 * moment is exact (it holds the lease, its terminal not written yet); the second door is a real `berth service` or `berth acp`. The peer goes on once the second door
 * has tried the lease (its reclaim lock came and went under `session-locks/`).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, watch, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SessionError, SessionStore } from "../../src/store/sessions/index.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { type AcpRig, withAcpRig } from "../acp/harness.js";
import { assertSoundFile, type Msg } from "./crash-rig.js";

const PEER = fileURLToPath(new URL("./settle-peer.js", import.meta.url));
const NOTE = "[This reply was interrupted before it finished.]";

let rig: AcpRig;
withAcpRig((r) => (rig = r), "openai-chat");

/** A session whose last turn has a partial answer and no terminal, as a process killed mid-answer leaves it. */
async function crashCut(home: string, cwd: string): Promise<string> {
  const store = new SessionStore({ home });
  const h = await store.create(cwd);
  await h.writer.append({ kind: "user", turn_id: "t1", text: "first question" }, { sync: true });
  await h.writer.append({ kind: "assistant", turn_id: "t1", message_id: "m1", text: "alpha beta ", partial: true }, { sync: true });
  await h.release();
  return h.id;
}

/** The settle peer, stopped inside its settle (the lease held). */
async function settlingPeer(home: string, id: string, mode: "load" | "open") {
  const go = join(mkdtempSync(join(tmpdir(), "settle-go-")), "go");
  const child = spawn(process.execPath, [PEER, home, id, mode, go], { stdio: ["ignore", "pipe", "inherit"] });
  const lines: string[] = [];
  let buf = "";
  let wake = (): void => undefined;
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    wake();
  });
  const line = async (n: number): Promise<string> => {
    while (lines.length < n) await new Promise<void>((r) => (wake = r));
    return lines[n - 1]!;
  };
  assert.equal(await line(1), "settling");
  return {
    goOn: () => writeFileSync(go, ""),
    result: () => line(2),
    kill: async () => {
      const closed = new Promise((r) => child.once("close", r));
      child.kill("SIGKILL");
      await closed;
    },
  };
}

/** Resolves once another process's attempt on the lease of `id` is over: its reclaim lock made and removed. */
function reclaimCameAndWent(home: string, id: string): Promise<void> {
  const locks = join(home, "session-locks");
  const reclaim = join(locks, `${id}.reclaim`);
  return new Promise((resolve) => {
    let seen = false;
    const w = watch(locks, (_ev, name) => {
      if (name !== `${id}.reclaim`) return;
      if (existsSync(reclaim)) seen = true;
      else if (seen) {
        w.close();
        resolve();
      }
    });
  });
}

const owner = (home: string, id: string): Msg => JSON.parse(readFileSync(join(home, "session-locks", `${id}.owner`), "utf8")) as Msg;
const record = (r: Msg): string => (r.kind === "user" ? `user:${r.text}` : r.kind === "terminal" ? `terminal:${r.status}:${r.assistant_text}` : (r.kind as string));

it("app-service session.open while another process's session/load settles the session: it waits, then opens", { timeout: 60_000 }, async () => {
  const home = rig.home;
  const cwd = mkdtempSync(join(tmpdir(), "settle-cwd-"));
  const id = await crashCut(home, cwd);
  const svc = new ServiceProcess({ home });
  const peer = await settlingPeer(home, id, "load");
  try {
    await svc.initialize();
    const during = owner(home, id).settling as unknown;
    const tried = reclaimCameAndWent(home, id);
    const opened = svc.request("session.open", {}, { session_id: id });
    await tried;
    peer.goOn();
    const r = await opened;
    assert.deepEqual([r.error, r.payload], [null, { session_id: id, status: "open" }], "not session_busy");
    assert.equal(during, true, "the settle-only lease said so in its owner file");
    assert.equal(await peer.result(), "settled null");
    assert.deepEqual(assertSoundFile(home, id).map(record), ["user:first question", "assistant", "terminal:failed:alpha beta "], "settled once");
    // The service keeps it: an ordinary lease, so another opener is refused at once, as before.
    assert.equal(owner(home, id).settling, undefined);
    const other = new ServiceProcess({ home });
    await other.initialize();
    assert.equal((await other.request("session.open", {}, { session_id: id })).error?.code, "session_busy");
    other.end();
    await other.exited;
  } finally {
    await peer.kill();
    svc.end();
    await svc.exited;
  }
});

it("ACP session/load while another process's session.open settles the session: it waits, then replays the settled turn", { timeout: 60_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "settle-cwd-"));
  const id = await crashCut(rig.home, cwd);
  const acp = rig.spawn({ cwd });
  const peer = await settlingPeer(rig.home, id, "open");
  try {
    await acp.initialize();
    const during = owner(rig.home, id).settling as unknown;
    const tried = reclaimCameAndWent(rig.home, id);
    const loaded = acp.agent.request("session/load", { sessionId: id, cwd, mcpServers: [] });
    await tried;
    peer.goOn();
    await loaded; // before: -32600 "another Berth process is running a turn in this session"
    assert.equal(during, true, "a kept lease said so while it settled");
    assert.equal(await peer.result(), "open");
    assert.equal(owner(rig.home, id).settling, undefined, "the kept lease is an ordinary one again");
    assert.deepEqual(acp.updatesOf(id), [
      { sessionUpdate: "user_message_chunk", content: { type: "text", text: "first question" } },
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "alpha beta " } },
      { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `\n\n${NOTE}` } },
    ]);
    assert.deepEqual(assertSoundFile(rig.home, id).map(record), ["user:first question", "assistant", "terminal:failed:alpha beta "], "settled once");
    assert.deepEqual(acp.invalid, []);
  } finally {
    await peer.kill();
    await acp.end();
  }
});

it("a settle that does not end within the bound is busy; a lease not held to settle is busy at once", { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "settle-cwd-"));
  const id = await crashCut(rig.home, cwd);
  const peer = await settlingPeer(rig.home, id, "load");
  try {
    const store = new SessionStore({ home: rig.home, locks: { settleWaitMs: 50 } });
    await assert.rejects(store.acquire(id, { closeInterrupted: true }), (e) => e instanceof SessionError && e.code === "busy");
  } finally {
    await peer.kill();
  }
  // The killed settler's lease is recovered at once; then a holder that keeps the lease, not settling, is refused
  // without waiting (a 60 s bound here would outlast the test's timeout).
  const holder = await new SessionStore({ home: rig.home }).acquire(id, { closeInterrupted: true });
  try {
    assert.equal(owner(rig.home, id).settling, undefined);
    const patient = new SessionStore({ home: rig.home, locks: { settleWaitMs: 60_000 } });
    await assert.rejects(patient.acquire(id, { closeInterrupted: true }), (e) => e instanceof SessionError && e.code === "busy");
  } finally {
    await holder.release();
  }
  assert.deepEqual(assertSoundFile(rig.home, id).map(record), ["user:first question", "assistant", "terminal:failed:alpha beta "]);
});
