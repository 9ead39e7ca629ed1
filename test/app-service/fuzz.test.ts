/**
 * Fuzz: thousands of random and mutated records, written in odd chunk sizes that split multi-byte characters.
 * The process never dies, every stdout line is a valid response envelope, and every record gets exactly one response.
 * `FUZZ_SEED` / `FUZZ_COUNT` (records) reproduce or lengthen a run.
 * @req AS-FRAME-10 @req AS-FRAME-14
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ServiceProcess } from "../helpers/service-process.js";

/** Deterministic PRNG (mulberry32) so a failure reproduces from the printed seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const METHODS = ["initialize", "status", "capabilities", "session.list", "turn.cancel", "auth.status", "config.get", "nope", ""];
const PIECES = ["{", "}", "[", "]", '"', ":", ",", "\\", "\\u00", "é", "😀", "€", "\r", " ", "null", "1e999", "-0", "true", "\u2028", "\u0000"];

it("survives random and mutated records", { timeout: 600_000 }, async () => {
  const seed = Number(process.env.FUZZ_SEED ?? 20261129);
  const r = rng(seed);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(r() * a.length)]!;
  const valid = (i: number) => {
    const o: Record<string, unknown> = { protocol_version: 1, kind: "request", request_id: `f${i}`, method: pick(METHODS), payload: {} };
    if (o.method === "initialize") o.payload = { supported_protocol_versions: [1] };
    if (r() < 0.2) o.session_id = pick([null, "s", 5, "é".repeat(70)]);
    if (r() < 0.1) o.extra = 1;
    if (r() < 0.1) o.protocol_version = pick([2, "1", null]);
    if (r() < 0.1) o.payload = pick([null, [], { deep: JSON.parse("[".repeat(40) + "]".repeat(40)) }, { s: "x".repeat(17000) }]);
    if (r() < 0.1) o.request_id = pick([7, "", "dup", "x".repeat(200)]);
    return JSON.stringify(o);
  };
  const mutate = (s: string) => {
    const chars = [...s];
    const n = 1 + Math.floor(r() * 4);
    for (let k = 0; k < n; k++) {
      const at = Math.floor(r() * (chars.length + 1));
      const op = r();
      if (op < 0.4) chars.splice(at, 1);
      else if (op < 0.8) chars.splice(at, 0, pick(PIECES));
      else chars.splice(at, 1, pick(PIECES));
    }
    return chars.join("").replace(/\n/g, "");
  };
  const records: string[] = [];
  const N = Number(process.env.FUZZ_COUNT ?? 3000);
  for (let i = 0; i < N; i++) {
    const x = r();
    if (x < 0.5) records.push(valid(i));
    else if (x < 0.9) records.push(mutate(valid(i)));
    else if (x < 0.95) records.push(Array.from({ length: Math.floor(r() * 50) }, () => pick(PIECES)).join("").replace(/\n/g, ""));
    else records.push("z".repeat(65536 + Math.floor(r() * 3))); // over the record limit
  }
  const stream = Buffer.from(records.map((s, i) => s + (i % 7 === 0 ? "\r\n" : "\n")).join(""));
  const svc = new ServiceProcess();
  let off = 0;
  while (off < stream.length) {
    const n = 1 + Math.floor(r() * 9000);
    await svc.write(stream.subarray(off, off + n));
    off += n;
  }
  svc.end();
  const { code, signal } = await svc.exited;
  assert.equal(signal, null, `seed ${seed}: the process died`);
  assert.equal(code, 0, `seed ${seed}: exit code; stderr ${svc.stderr.slice(0, 300)}`);
  assert.equal(svc.partial, "", "no unterminated output");
  assert.equal(svc.lines.length, N, `seed ${seed}: one response per record`);
  for (const line of svc.lines) {
    const m = JSON.parse(line) as Record<string, unknown>;
    assert.deepEqual(Object.keys(m), ["protocol_version", "kind", "request_id", "session_id", "method", "payload", "error"]);
    assert.equal(m.protocol_version, 1);
    assert.equal(m.kind, "response");
    assert.ok((m.payload === null) !== (m.error === null), "exactly one of payload/error");
    assert.ok(Buffer.byteLength(line) + 1 <= 65536);
  }
});
