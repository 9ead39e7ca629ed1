/**
 * A fork killed with SIGKILL while it copies (docs/sessions.md, "Forks"): a child process (fork-child.ts) forks a
 * session of large records and stops at a kill point — the stamp of a copied record (before the first, in the middle,
 * the last), the fsync of the copy, or none (the fork resolved) — where it is killed. A fresh `berth service` then
 * lists and opens what is there. Invariants: the fork is either not there at all (no session listed, no file left
 * in `sessions/` once a list ran) or whole (every record of the source through the fork turn's terminal, seqs 1…n
 * contiguous, the checkpoint re-pointed, nothing appended when it is opened); the source is byte for byte unchanged.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { SessionStore } from "../../src/store/sessions/index.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { assertSoundFile, closeObserver, fileRecords, sessionFile, type Msg } from "./crash-rig.js";

const CHILD = fileURLToPath(new URL("./fork-child.js", import.meta.url));
/** Turn t3 is forked: t0, t1, the checkpoint after t1, t2, t3 (13 records; stamps 3…15 stamp them). */
const FORK_TURN = "t3";
const COPIED = 13;
const POINTS = ["stamp:1", "stamp:3", "stamp:6", "stamp:11", "stamp:15", "sync:1", "sync:2", "none"];

/** Six completed turns of ~200 KiB each (the copy spans several writes), a checkpoint after t1. */
async function source(home: string, cwd: string): Promise<string> {
  const store = new SessionStore({ home });
  const h = await store.create(cwd);
  for (let i = 0; i < 6; i++) {
    await h.writer.append({ kind: "user", turn_id: `t${i}`, text: `question ${i}` });
    await h.writer.append({ kind: "assistant", turn_id: `t${i}`, message_id: "m", text: `answer ${i} ${"é".repeat(100_000)}`, partial: false });
    const term = await h.writer.append({ kind: "terminal", turn_id: `t${i}`, status: "completed", assistant_text: `answer ${i}` });
    if (i === 1) await h.writer.append({ kind: "checkpoint", summary: "t0 and t1 summarized", cutoff_seq: term.seq });
  }
  await h.release();
  return h.id;
}

/** A record as compared: long texts by length and hash (a failure message stays readable). */
function brief(r: Msg): Msg {
  const t = r.text as unknown;
  return typeof t === "string" && t.length > 64 ? { ...r, text: `${t.length} chars, sha256 ${createHash("sha256").update(t).digest("hex").slice(0, 12)}` } : r;
}

/** What a whole fork holds: the source's records through the fork turn's terminal, renumbered from 1. */
function expectedCopy(home: string, id: string): Msg[] {
  const recs = fileRecords(home, id).records;
  const end = recs.findIndex((r) => r.kind === "terminal" && r.turn_id === FORK_TURN);
  return recs.slice(0, end + 1).map(({ seq, at: _a, ...r }: Msg) => {
    const copySeq = recs.indexOf(recs.find((x) => x.seq === seq)!) + 1;
    // The checkpoint covers the same records: t1's terminal, the copy's 6th record.
    return brief({ seq: copySeq, ...r, ...(r.kind === "checkpoint" ? { cutoff_seq: 6 } : {}) });
  });
}

/** Runs the child to `point` and kills it there (or once the fork resolved). */
async function killForkAt(home: string, id: string, cwd: string, point: string): Promise<string> {
  const child = spawn(process.execPath, [CHILD, home, id, FORK_TURN, cwd], { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, FORK_KILL_AT: point } });
  const closed = new Promise((r) => child.once("close", r));
  let out = "";
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    child.once("exit", (code) => reject(new Error(`fork child exited ${code} before a line: ${out}`)));
  });
  child.kill("SIGKILL");
  await closed;
  return line;
}

async function listAll(svc: ServiceProcess): Promise<string[]> {
  const ids: string[] = [];
  for (let after: string | null = null; ; ) {
    const r = await svc.request("session.list", { after, limit: 32 });
    assert.equal(r.error, null);
    ids.push(...(r.payload.sessions as Msg[]).map((s) => s.session_id as string));
    if (r.payload.truncated !== true) return ids;
    after = r.payload.next_after as string;
  }
}

test("a fork killed while it copies is, to a fresh process, either absent or whole; the source is unchanged", async (t) => {
  const leftDebris: string[] = [];
  for (const point of POINTS) await t.test(`killed at ${point}`, async () => {
    const home = mkdtempSync(join(tmpdir(), "berth-fork-crash-"));
    const cwd = mkdtempSync(join(tmpdir(), "berth-fork-cwd-"));
    const id = await source(home, cwd);
    const before = readFileSync(sessionFile(home, id));
    const want = expectedCopy(home, id);
    assert.equal(want.length, COPIED);
    const line = await killForkAt(home, id, cwd, point);
    assert.ok(line === `at ${point}` || line.startsWith("done "), `${point}: ${line}`);
    const label = line.startsWith("done ") ? "killed once the fork resolved" : `killed ${line}`;
    if (readdirSync(join(home, "sessions")).length > (line.startsWith("done ") ? 2 : 1)) leftDebris.push(point);

    const svc = new ServiceProcess({ home, cwd });
    try {
      await svc.initialize();
      const forks = (await listAll(svc)).filter((s) => s !== id);
      assert.ok(forks.length <= 1, `${label}: at most one fork listed: ${JSON.stringify(forks)}`);
      if (line.startsWith("done ")) assert.deepEqual(forks, [line.slice(5)], `${label}: the resolved fork is listed`);
      // Nothing but whole sessions is left in sessions/ once a list ran: a killed copy's debris is removed.
      assert.deepEqual(readdirSync(join(home, "sessions")).sort(), [id, ...forks].map((s) => `${s}.jsonl`).sort(), `${label}: sessions/ holds the source and a whole fork only`);
      for (const f of forks) {
        const got = assertSoundFile(home, f).map(({ at: _a, ...r }) => brief(r));
        assert.deepEqual(got, want, `${label}: the fork is whole (seqs 1…${COPIED}, the checkpoint re-pointed)`);
        assert.equal((await svc.request("session.open", {}, { session_id: f })).error, null, `${label}: the fork opens`);
        assert.equal(fileRecords(home, f).records.length, COPIED, `${label}: opening the fork appends nothing (no interrupted turn)`);
      }
      assert.deepEqual(readFileSync(sessionFile(home, id)), before, `${label}: the source is unchanged`);
      // Only the observer's own lease of the fork it opened: a killed fork's lease went with its debris.
      const locks = readdirSync(join(home, "session-locks")).filter((n) => !forks.some((f) => n.startsWith(`${f}.`)));
      assert.deepEqual(locks, [], `${label}: no lock of the killed fork is left`);
    } finally {
      await closeObserver(svc);
    }
  });
  assert.ok(leftDebris.length > 0, "some kill points land inside the copy (they leave a file behind for the next list)");
});
