/**
 * Kill points around the replay projection sidecar (`session-index/<id>.proj`, docs/sessions.md "Replay
 * projections"), the one file the store writes beside a session's JSONL: a `berth service` is killed with SIGKILL
 * right after a replay answered (the sidecar not written yet: `replied`), once the sidecar is on disk (`written`),
 * inside its write (`mid-write`: the temporary file cut at a seeded byte, as a kill during the `writev` leaves it),
 * with the sidecar itself damaged (`damaged`: cut or flipped at a seeded byte, as a power loss after the unsynced
 * rename may leave it), or mid-turn with a sidecar of the open turn (`turn`). A fresh service then lists, opens and
 * replays the session: what it replays equals what the killed one replied (plus the settled turn), equals a
 * replay without any sidecar (cursors included), and a new turn runs; no temporary file of the dead writer stays.
 * `CRASH_SIDECAR_COUNT` (default 3) and `CRASH_SIDECAR_SEED` run more or other cases.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { prng } from "../helpers/prng.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { startRig } from "../turns/helpers.js";
import { assertSoundFile, conversation, fileRecords, listed, replayAll, serviceTurn, until } from "./crash-rig.js";

const COUNT = Number(process.env.CRASH_SIDECAR_COUNT ?? 3);
const SEED = Number(process.env.CRASH_SIDECAR_SEED ?? 20261206);
const POINTS = ["mid-write", "turn", "damaged", "replied", "written"] as const;
type Point = (typeof POINTS)[number];
const ANSWER = Array.from({ length: 24 }, (_, i) => `w${i} `).join("");

async function fresh(home: string, cwd: string): Promise<ServiceProcess> {
  const svc = new ServiceProcess({ home, cwd });
  await svc.initialize();
  return svc;
}

async function end(svc: ServiceProcess | null): Promise<void> {
  if (svc !== null && svc.child.exitCode === null) {
    svc.end();
    await svc.exited;
  }
}

const indexDir = (home: string): string => join(home, "session-index");
const tmpFiles = (home: string, id: string): string[] =>
  existsSync(indexDir(home)) ? readdirSync(indexDir(home)).filter((n) => n.startsWith(`${id}.proj.`) && n.endsWith(".tmp")) : [];

async function oneCase(seed: number, point: Point): Promise<void> {
  const rnd = prng(seed);
  const label = `seed ${seed}: killed at ${point}`;
  const rig = await startRig();
  const { home, cwd } = { home: rig.svc.home, cwd: rig.svc.cwd! };
  let b: ServiceProcess | null = null;
  try {
    const a = rig.svc;
    const id = (await a.request("session.create", {})).payload.session_id as string;
    assert.equal((await serviceTurn(a, id, "first")).payload.status, "completed", label);
    if (point === "turn") {
      rig.fake.script([{ steps: [{ text: ANSWER, chunks: 24 }, { waitForAbort: true }], chunkDelayMs: 5 }]);
      a.send({ protocol_version: 1, kind: "request", request_id: "open-turn", session_id: id, method: "turn.start", payload: { prompt: "second" } });
      await until(`${label}: a segment on disk`, () => fileRecords(home, id).records.some((r) => r.kind === "assistant" && r.text.startsWith("w0")));
    }
    const before = (await replayAll(a, id)).items;
    const proj = join(indexDir(home), `${id}.proj`);
    if (point !== "replied") await until(`${label}: the sidecar written`, () => existsSync(proj) && tmpFiles(home, id).length === 0);
    a.kill("SIGKILL");
    await a.exited;
    rig.fake.unscript();
    if (point === "mid-write" || point === "damaged") {
      const bytes = readFileSync(proj);
      const at = Math.floor(rnd() * bytes.length);
      if (point === "mid-write") writeFileSync(`${proj}.${a.child.pid}-0123456789ab.tmp`, bytes.subarray(0, at), { mode: 0o600 });
      else if (rnd() < 0.5) writeFileSync(proj, bytes.subarray(0, at));
      else writeFileSync(proj, Buffer.concat([bytes.subarray(0, at), Buffer.from([bytes[at]! ^ 0x20]), bytes.subarray(at + 1)]));
    }

    b = await fresh(home, cwd);
    assert.ok(await listed(b, id), `${label}: listed`);
    assert.equal((await b.request("session.open", {}, { session_id: id })).error, null, `${label}: opens`);
    const replayed = (await replayAll(b, id)).items;
    const conv = conversation(replayed);
    if (point === "turn") {
      assert.deepEqual(conv.slice(0, 3), conversation(before).slice(0, 3), `${label}: the settled turn as replied before`);
      assert.equal(conv[3], "user:second", label);
      const text = conv[4]!.replace(/^assistant:/, "");
      assert.ok(ANSWER.startsWith(text) && text.startsWith("w0") && conv[5] === "terminal:failed", `${label}: the open turn settled: ${JSON.stringify(conv)}`);
    } else assert.deepEqual(replayed, before, `${label}: the replay the dead service replied, cursors included`);
    assert.equal((await serviceTurn(b, id, "after")).payload.status, "completed", `${label}: a new turn`);
    const last = (await replayAll(b, id)).items;
    assert.deepEqual(conversation(last).slice(-3), ["user:after", "assistant:echo: after", "terminal:completed"], label);
    // That replay writes the session's sidecar anew; the dead writer's temporary file does not stay.
    await until(`${label}: no temporary sidecar left`, () => tmpFiles(home, id).length === 0);
    // A replay without any sidecar derives the same items and cursors from the JSONL alone.
    await end(b);
    b = null;
    rmSync(indexDir(home), { recursive: true, force: true });
    b = await fresh(home, cwd);
    assert.deepEqual((await replayAll(b, id)).items, last, `${label}: the same replay without a sidecar`);
    assertSoundFile(home, id);
  } finally {
    await end(b);
    await rig.close();
  }
}

test(`SIGKILL around sidecar writes (${COUNT} cases, seed ${SEED})`, { timeout: 60_000 + COUNT * 20_000 }, async () => {
  for (let i = 0; i < COUNT; i++) await oneCase(SEED + i, POINTS[i % POINTS.length]!);
});
