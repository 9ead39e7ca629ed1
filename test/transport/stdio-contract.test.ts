/** The stdio JSONL transport passes the shared transport contract. @req AS-FRAME-12 */
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
