/**
 * Backpressure through the real process: while the client does not read stdout, the service stops consuming
 * stdin instead of buffering without bound; once the client reads again, every response arrives in order.
 * @req AS-FRAME-12
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ServiceProcess } from "../helpers/service-process.js";

it("stops reading input while stdout is not drained, and loses nothing", async () => {
  const svc = new ServiceProcess();
  await svc.initialize();
  svc.child.stdout.pause();
  const record = (i: number) => JSON.stringify({ protocol_version: 1, kind: "request", request_id: `q${i}`, method: "capabilities", payload: {} }) + "\n";
  // Each capabilities response is ~2 KiB; 4,000 of them is ~8 MiB of output, far beyond pipe buffers + high-water marks.
  const total = 4000;
  let written = 0;
  let stalledAt = -1;
  while (written < total) {
    const ok = svc.child.stdin.write(record(written++));
    if (!ok) {
      const drained = await Promise.race([
        new Promise<boolean>((r) => svc.child.stdin.once("drain", () => r(true))),
        new Promise<boolean>((r) => setTimeout(() => r(false), 1500)),
      ]);
      if (!drained) {
        stalledAt = written;
        break;
      }
    }
  }
  assert.ok(stalledAt > 0 && stalledAt < total, `input should stall while output is unread (stalled at ${stalledAt})`);
  svc.child.stdout.resume();
  while (written < total) if (!svc.child.stdin.write(record(written++))) await new Promise((r) => svc.child.stdin.once("drain", r));
  svc.end();
  const lines = await svc.waitLines(total + 1, 60_000);
  assert.equal((await svc.exited).code, 0);
  for (let i = 0; i < total; i++) {
    const m = JSON.parse(lines[i + 1]!) as { request_id: string; error: unknown };
    assert.equal(m.request_id, `q${i}`);
    assert.equal(m.error, null);
  }
});
