/** The stdio JSONL transport passes the shared transport contract. @req AS-FRAME-12 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PassThrough, Writable } from "node:stream";
import { JsonlTransport } from "../../src/transport/stdio.js";
import { transportContract, type ContractPeer } from "../helpers/transport-contract.js";

transportContract("stdio (JsonlTransport over stream pair)", ({ maxRecordBytes, highWaterBytes }) => {
  const input = new PassThrough();
  let out = "";
  let stalled = false;
  let pending: Array<() => void> = [];
  const output = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _enc, cb) {
      const done = () => {
        out += chunk.toString("utf8");
        cb();
      };
      if (stalled) pending.push(done);
      else done();
    },
  });
  const transport = new JsonlTransport(input, output, { maxRecordBytes, highWaterBytes });
  const peer: ContractPeer = {
    transport,
    input: (b) => void input.write(b),
    endInput: () => void input.end(),
    stallOutput: () => (stalled = true),
    resumeOutput: () => {
      stalled = false;
      const p = pending;
      pending = [];
      for (const f of p) f();
    },
    output: () => out,
  };
  return peer;
});

describe("stdio JsonlTransport input after reading stopped", () => {
  it("an input error reported after EOF does not become an unhandled 'error' event", async () => {
    const input = new PassThrough();
    const transport = new JsonlTransport(input, new Writable({ write: (_c, _e, cb) => cb() }), { maxRecordBytes: 1024, highWaterBytes: 4096 });
    input.end('{"a":1}\n');
    const frames: unknown[] = [];
    for await (const f of transport.frames()) frames.push(f);
    assert.equal(frames.length, 1);
    // Without a listener, emit('error') throws the error here.
    assert.doesNotThrow(() => input.emit("error", new Error("late read error")));
  });
});
