/** The one framing module's oversize policies, at and one past the bound, and the host socket reader on it. */
import { it } from "node:test";
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import type { Socket } from "node:net";
import { LineSplitter, type Frame } from "../../src/transport/jsonl.js";
import { attachLineReader, type FrameError } from "../../src/transport/host-framing.js";

const text = (fs: Frame[]): Array<string | null> => fs.map((f) => (f.kind === "record" ? f.bytes.toString() : null));

it("skip: a record at the bound passes, one byte more is reported once and reading goes on", () => {
  const s = new LineSplitter(4); // 3 bytes + LF
  assert.deepEqual(text(s.push(Buffer.from("abc\nabcd\nxy\r\n"))), ["abc", null, "xy"]);
  assert.deepEqual(text(s.push(Buffer.from("abcde"))), []);
  assert.deepEqual(text(s.push(Buffer.from("fg\nz"))), [null]);
  assert.equal(s.pending, 1);
  assert.deepEqual(text(s.end()), ["z"]);
});

it("stop: reported as soon as the bound is passed (before any LF), nothing after", () => {
  let bound = 4;
  const s = new LineSplitter(() => bound, { oversize: "stop" });
  assert.deepEqual(text(s.push(Buffer.from("abc\n"))), ["abc"]);
  bound = 3; // a bound that changed after the stream started is read per chunk
  assert.deepEqual(text(s.push(Buffer.from("abc"))), [null]);
  assert.deepEqual(text(s.push(Buffer.from("\nok\n"))), []);
  assert.deepEqual(s.end(), []);
});

it("the host socket reader skips blank lines, keeps split UTF-8, and stops at the first bad frame", () => {
  const sock = new PassThrough() as unknown as Socket;
  const frames: unknown[] = [];
  const errors: FrameError[] = [];
  attachLineReader(sock, { limit: 64, onFrame: (f) => frames.push(f), onError: (e) => errors.push(e) });
  const euro = Buffer.from('{"a":"€"}\n');
  sock.emit("data", Buffer.concat([Buffer.from("\n"), euro.subarray(0, 7)]));
  sock.emit("data", euro.subarray(7));
  sock.emit("data", Buffer.from("x".repeat(70)));
  sock.emit("data", Buffer.from('\n{"b":1}\n'));
  assert.deepEqual(frames, [{ a: "€" }]);
  assert.deepEqual(errors, [{ kind: "oversize", bytes: 65, limit: 64 }]);
});
