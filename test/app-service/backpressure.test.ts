/**
 * Backpressure through the real process: while the client does not read stdout, the service stops consuming
 * stdin instead of buffering without bound; once the client reads again, every response arrives in order.
 * Decided by observable conditions only (no timer): the output backing up to the client, and which write
 * callbacks (each fires once the record was handed to the pipe) had fired by then.
 * @req AS-FRAME-12
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ServiceProcess } from "../helpers/service-process.js";

/** Resolves once `cond()` holds (checked after each turn of the event loop's timers). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
}

it("stops reading input while stdout is not drained, and loses nothing", async () => {
  const svc = new ServiceProcess();
  await svc.initialize();
  const before = svc.lines.length;
  const stdout = svc.child.stdout;
  let exited = false;
  void svc.exited.then(() => (exited = true));
  stdout.pause();
  const record = (i: number) => JSON.stringify({ protocol_version: 1, kind: "request", request_id: `q${i}`, method: "capabilities", payload: {} }) + "\n";
  // Each capabilities response is ~2 KiB; 4,000 of them is ~8 MiB of output, far beyond pipe buffers + high-water marks.
  const total = 4000;
  let accepted = 0;
  let responsesWhenAllAccepted = -1;
  let allAccepted!: () => void;
  const allIn = new Promise<void>((r) => (allAccepted = r));
  for (let i = 0; i < total; i++) {
    svc.child.stdin.write(record(i), () => {
      if (++accepted < total) return;
      responsesWhenAllAccepted = svc.lines.length - before;
      allAccepted();
    });
  }
  // The service's output has backed up all the way to this (paused) reader: it has answered as much as it could.
  await until(() => exited || stdout.readableLength >= stdout.readableHighWaterMark);
  assert.ok(!exited, `the service exited: ${svc.stderr.slice(0, 500)}`);
  assert.ok(accepted < total, `input should stall while output is unread (${accepted} of ${total} records accepted)`);
  assert.equal(svc.lines.length, before, "nothing was read while stdout was paused");
  stdout.resume();
  await allIn;
  // The last records were taken only after output was read: the service held input back, it did not buffer it.
  assert.ok(responsesWhenAllAccepted > 0, `the last input was accepted before any output was read (${responsesWhenAllAccepted})`);
  svc.end();
  const lines = await svc.waitLines(total + 1, 60_000);
  assert.equal((await svc.exited).code, 0);
  for (let i = 0; i < total; i++) {
    const m = JSON.parse(lines[i + 1]!) as { request_id: string; error: unknown };
    assert.equal(m.request_id, `q${i}`);
    assert.equal(m.error, null);
  }
});
