/**
 * Backpressure through the real process: while the client does not read stdout, the service stops consuming
 * stdin instead of buffering without bound; once the client reads again, every response arrives in order.
 * Decided by conditions, not a quiet window: the service reports (`BERTH_DEBUG_IO=1`, stderr) when it stops
 * reading because its output is backed up and when input has ended. A service that reads ahead regardless reaches
 * EOF before it ever pauses, and the test fails at once.
 * @req AS-FRAME-12
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ServiceProcess } from "../helpers/service-process.js";

it("stops reading input while stdout is not drained, and loses nothing", async () => {
  const svc = new ServiceProcess({ env: { BERTH_DEBUG_IO: "1" } });
  try {
    await svc.initialize();
    svc.child.stdout.pause();
    const record = (i: number) => JSON.stringify({ protocol_version: 1, kind: "request", request_id: `q${i}`, method: "capabilities", payload: {} }) + "\n";
    // Each capabilities response is ~2 KiB; 4,000 of them is ~8 MiB of output, far beyond pipe buffers and
    // high-water marks. The input (~480 KB) is far beyond the pipe plus the service's read-ahead (64 KiB each).
    const total = 4000;
    for (let i = 0; i < total; i++) svc.child.stdin.write(record(i));
    svc.child.stdin.end();

    const first = await svc.waitStderr(/berth-io input-(paused|eof) records=(\d+)\n/);
    assert.equal(first[1], "paused", `the service read all input without pausing for its unread output: ${first[0]}`);
    const records = Number(first[2]);
    assert.ok(records > 0 && records < total, `paused after ${records} of ${total} records`);
    // Input is still held back on our side of the pipe: the service did not take it all into memory.
    assert.equal(svc.child.stdin.writableFinished, false, "all input was accepted while the service was paused");
    assert.equal(svc.lines.length, 1, "nothing was read from stdout while it was paused (only initialize's answer)");

    svc.child.stdout.resume();
    const eof = await svc.waitStderr(/berth-io input-eof records=(\d+)\n/);
    assert.equal(Number(eof[1]), total + 1, "every record was read (initialize included)");
    const lines = await svc.waitLines(total + 1, 60_000);
    assert.equal((await svc.exited).code, 0);
    for (let i = 0; i < total; i++) {
      const m = JSON.parse(lines[i + 1]!) as { request_id: string; error: unknown };
      assert.equal(m.request_id, `q${i}`);
      assert.equal(m.error, null);
    }
  } finally {
    svc.kill();
  }
});
