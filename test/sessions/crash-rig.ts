/**
 * Helpers of the crash-and-resume tests (docs/sessions.md, "Crash and resume"): a door process killed with SIGKILL
 * at an observable point of a turn, then the session observed through a fresh `berth service` (list, open, replay,
 * a new turn) and its file checked record by record. Everything runs over real processes and a loopback fake
 * provider; every wait is a bounded poll for an observable condition.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ServiceProcess } from "../helpers/service-process.js";
import type { Rig } from "../scv/client.js";

export type Msg = Record<string, any>;

/** Polls `f` until it returns a value other than undefined/false (bounded: a safety net, not a condition). */
export async function until<T>(what: string, f: () => T | undefined | false, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sessionFile = (home: string, id: string): string => join(home, "sessions", `${id}.jsonl`);

/** The session file's records (header excluded) and the lines that are not records. */
export function fileRecords(home: string, id: string): { records: Msg[]; bad: string[]; text: string } {
  const path = sessionFile(home, id);
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  const records: Msg[] = [];
  const bad: string[] = [];
  const lines = text.split("\n");
  for (const [i, line] of lines.entries()) {
    if (i === 0 || line === "") continue;
    try {
      const r = JSON.parse(line) as Msg;
      if (typeof r.seq === "number") records.push(r);
      else bad.push(line);
    } catch {
      bad.push(line);
    }
  }
  return { records, bad, text };
}

/**
 * No corrupt or duplicate records: every line a record (but `torn`, a fragment a test cut the file to, which stays an
 * isolated line), seqs strictly increasing, one terminal per turn at most.
 */
export function assertSoundFile(home: string, id: string, torn: string[] = []): Msg[] {
  const { records, bad } = fileRecords(home, id);
  assert.deepEqual(bad, torn, "every line of the session file is a record");
  for (let i = 1; i < records.length; i++) assert.ok(records[i]!.seq > records[i - 1]!.seq, `seq strictly increasing at ${i}`);
  const terminals = records.filter((r) => r.kind === "terminal").map((r) => r.turn_id as string);
  assert.equal(new Set(terminals).size, terminals.length, "at most one terminal record per turn");
  return records;
}

/** A `berth service` on the rig's home, initialized: the fresh process that observes a session after a crash. */
export async function observer(rig: Rig): Promise<ServiceProcess> {
  const svc = new ServiceProcess({ home: rig.home });
  await svc.initialize();
  return svc;
}

/**
 * Every replay item of the session (all pages) and the last page's flags. Never retried: a dead writer's append lock,
 * marked or not (killed inside a batch), blocks no replay (docs/sessions.md, "Crash and resume").
 */
export async function replayAll(svc: ServiceProcess, id: string): Promise<{ items: Msg[]; gap: boolean }> {
  const items: Msg[] = [];
  let after: string | null = null;
  for (;;) {
    const r = await svc.request("session.replay", { after, limit: 32 }, { session_id: id });
    assert.equal(r.error, null, `replay: ${JSON.stringify(r.error)}`);
    items.push(...(r.payload.events as Msg[]));
    if (r.payload.truncated !== true) return { items, gap: r.payload.gap as boolean };
    after = r.payload.next_cursor as string;
  }
}

/** Replay items reduced to what a reader compares: `user:…`, `assistant:…` (parts joined), `terminal:<status>`. */
export function conversation(items: Msg[]): string[] {
  const out: string[] = [];
  for (const it of items) {
    if (it.kind === "terminal") out.push(`terminal:${it.status}`);
    else if (it.kind === "message") {
      if (it.part === 0) out.push(`${it.role}:${it.text}`);
      else out[out.length - 1] += it.text;
    }
  }
  return out;
}

export async function listed(svc: ServiceProcess, id: string): Promise<boolean> {
  // Every page (a long fuzz run leaves more sessions than one page of 32 holds).
  for (let after: string | null = null; ; ) {
    const r = await svc.request("session.list", { after, limit: 32 });
    assert.equal(r.error, null);
    if ((r.payload.sessions as Msg[]).some((s) => s.session_id === id)) return true;
    if (r.payload.truncated !== true) return false;
    after = r.payload.next_after as string;
  }
}

/** Starts a turn on `id` through the observer and waits for its terminal event. */
export async function serviceTurn(svc: ServiceProcess, id: string, prompt: string): Promise<Msg> {
  const from = svc.lines.length;
  const requestId = `t-${prompt.replace(/\W/g, "")}-${from}`;
  const res = await svc.request("turn.start", { prompt }, { session_id: id }, requestId);
  assert.equal(res.error, null, `turn.start: ${JSON.stringify(res.error)}`);
  return until(`terminal of ${requestId}`, () =>
    svc.lines
      .slice(from)
      .map((l) => JSON.parse(l) as Msg)
      .find((m) => m.kind === "event" && m.event === "turn.terminal" && m.request_id === requestId),
  );
}

/** Ends the observer (EOF) and waits for it. */
export async function closeObserver(svc: ServiceProcess): Promise<void> {
  if (svc.child.exitCode === null) {
    svc.end();
    await svc.exited;
  }
}
