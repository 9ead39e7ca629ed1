/**
 * The SCV writer's contract (src/protocols/scv/writer.ts) against a Writable whose reader the test controls:
 * bounded by frames and bytes, FIFO admission, nothing dropped, abort leaves only the aborted frame out, a stall
 * reported once, destroy releases waiters.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { FrameWriter } from "../../src/protocols/scv/writer.js";

/** A Writable that accepts one chunk per `release()`. */
class SlowSink extends Writable {
  chunks: string[] = [];
  private pending: Array<() => void> = [];
  constructor() {
    super({ highWaterMark: 1, decodeStrings: false });
  }
  override _write(chunk: string | Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.chunks.push(chunk.toString());
    this.pending.push(() => cb());
  }
  release(n = Infinity): void {
    while (n-- > 0 && this.pending.length > 0) this.pending.shift()!();
  }
  lines(): string[] {
    return this.chunks.join("").split("\n").filter((l) => l !== "");
  }
}

const tick = () => new Promise<void>((r) => setImmediate(r));

it("holds at most maxFrames, admits waiters in order, and loses nothing", async () => {
  const sink = new SlowSink();
  const w = new FrameWriter(sink, { maxFrames: 8, maxBytes: 1 << 20, stallMs: 60_000 });
  const results: Array<Promise<boolean>> = [];
  const raw: Array<boolean | Promise<boolean>> = [];
  for (let i = 0; i < 50; i++) {
    const r = w.emit(() => `f${i}`);
    raw.push(r);
    results.push(Promise.resolve(r));
  }
  await tick();
  assert.ok(w.heldFrames <= 8, `held ${w.heldFrames}`);
  assert.ok(raw.some((r) => r instanceof Promise), "later frames wait");
  while (sink.lines().length < 50) {
    sink.release();
    await tick();
    assert.ok(w.heldFrames <= 8);
  }
  assert.deepEqual(await Promise.all(results), results.map(() => true));
  assert.deepEqual(sink.lines(), Array.from({ length: 50 }, (_, i) => `f${i}`));
});

it("bounds held bytes and keeps order when a big frame waits for room", async () => {
  const sink = new SlowSink();
  const w = new FrameWriter(sink, { maxFrames: 256, maxBytes: 1000, stallMs: 60_000 });
  const r1 = w.emit(() => "a".repeat(600));
  await tick();
  const r2 = w.emit(() => "b".repeat(600));
  const r3 = w.emit(() => "c");
  assert.equal(r1, true);
  await tick();
  assert.deepEqual(sink.lines().map((l) => l[0]), ["a"]);
  sink.release();
  await Promise.all([r2, r3]);
  while (sink.lines().length < 3) {
    sink.release();
    await tick();
  }
  assert.deepEqual(sink.lines().map((l) => l[0]), ["a", "b", "c"]);
});

it("an aborted wait drops only its own frame; frames are built at admission (sequence order = wire order)", async () => {
  const sink = new SlowSink();
  const w = new FrameWriter(sink, { maxFrames: 1, maxBytes: 1 << 20, stallMs: 60_000 });
  let seq = 0;
  const build = (tag: string) => () => `${tag}:${++seq}`;
  assert.equal(w.emit(build("x")), true);
  await tick();
  const ctl = new AbortController();
  const a = w.emit(build("aborted"), ctl.signal);
  const b = w.emit(build("y"));
  ctl.abort();
  assert.equal(await a, false);
  while (sink.lines().length < 2) {
    sink.release();
    await tick();
  }
  assert.equal(await b, true);
  assert.deepEqual(sink.lines(), ["x:1", "y:2"]);
});

it("reports a stall once when nothing drains, and destroy releases every waiter", async () => {
  const sink = new SlowSink();
  let stalls = 0;
  let stalled!: () => void;
  const stalledP = new Promise<void>((r) => (stalled = r));
  const w = new FrameWriter(sink, {
    maxFrames: 2,
    maxBytes: 1 << 20,
    stallMs: 20,
    onStall: () => {
      stalls++;
      stalled();
    },
  });
  const rs = ["1", "2", "3", "4"].map((f) => Promise.resolve(w.emit(() => f)));
  await stalledP;
  w.destroy();
  const out = await Promise.all(rs);
  assert.equal(stalls, 1);
  assert.equal(out.filter((x) => x === false).length >= 1, true);
  assert.equal(w.emit(() => "5"), false);
});

it("frames admitted while the stream waits for drain are written after the drain", async () => {
  const sink = new SlowSink();
  const w = new FrameWriter(sink, { maxFrames: 256, maxBytes: 1 << 20, stallMs: 60_000 });
  assert.equal(w.emit(() => "first"), true);
  await tick(); // flushed; the sink (highWaterMark 1) now asks for a drain
  assert.equal(w.emit(() => "second"), true); // admitted into the queue while waiting for drain
  await tick();
  assert.deepEqual(sink.lines(), ["first"]);
  sink.release(); // drain
  while (sink.lines().length < 2) {
    await tick();
    sink.release();
  }
  assert.deepEqual(sink.lines(), ["first", "second"]);
});

it("counts held bytes exactly for multi-byte text (frames are counted in UTF-16 units only far from the bound)", async () => {
  // 300 × "é" is 600 UTF-8 bytes; 300 × "a" is 300. Both frames are 300 units long.
  for (const [ch, expectRoom] of [["é", false], ["a", true]] as const) {
    const sink = new SlowSink();
    const w = new FrameWriter(sink, { maxFrames: 256, maxBytes: 700, stallMs: 60_000 });
    assert.equal(w.emit(() => ch.repeat(300)), true);
    await tick(); // handed to the sink, which holds it (in flight)
    assert.equal(w.canAdmit(), true, "one frame held, under the bound");
    w.push(ch.repeat(300));
    assert.equal(w.canAdmit(), expectRoom, `${ch}: ${expectRoom ? "600 bytes held leave room" : "1200 bytes held leave none"}`);
    const later = w.emit(() => "z");
    assert.equal(later === true, expectRoom);
    while (sink.lines().length < 3) {
      sink.release();
      await tick();
    }
    assert.equal(await later, true);
    assert.deepEqual(sink.lines(), [ch.repeat(300), ch.repeat(300), "z"]);
  }
});
