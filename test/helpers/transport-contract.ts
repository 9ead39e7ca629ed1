/**
 * The transport contract every JSONL adapter passes: partial lines, CRLF, over-limit lines, EOF,
 * backpressure, idempotent close. An adapter supplies a factory wiring its transport to a controllable peer.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Frame } from "../../src/transport/jsonl.js";

export interface ContractTransport {
  frames(): AsyncIterable<Frame>;
  send(line: string): void;
  flush(): void;
  readonly pressured: boolean;
  writable(): Promise<void>;
  close(): Promise<void>;
}

export interface ContractPeer {
  transport: ContractTransport;
  /** Peer -> transport bytes. */
  input(bytes: Buffer | string): void;
  endInput(): void;
  /** Stops/resumes the peer reading the transport's output. */
  stallOutput(): void;
  resumeOutput(): void;
  /** Everything the peer has read so far. */
  output(): string;
}

export type PeerFactory = (opts: { maxRecordBytes: number; highWaterBytes: number }) => ContractPeer;

async function collect(t: ContractTransport, n = Infinity): Promise<Frame[]> {
  const out: Frame[] = [];
  for await (const f of t.frames()) {
    out.push(f);
    if (out.length >= n) break;
  }
  return out;
}

const text = (f: Frame | undefined): string => (f && f.kind === "record" ? f.bytes.toString("utf8") : `<${f?.kind}>`);

export function transportContract(name: string, make: PeerFactory): void {
  describe(`transport contract: ${name}`, () => {
    it("reassembles partial lines and multi-byte characters split across chunks", async () => {
      const p = make({ maxRecordBytes: 1024, highWaterBytes: 1024 });
      const bytes = Buffer.from('{"a":"h€llo 😀"}\n{"b":1}\n');
      for (let i = 0; i < bytes.length; i++) p.input(bytes.subarray(i, i + 1));
      p.endInput();
      const frames = await collect(p.transport);
      assert.deepEqual(frames.map(text), ['{"a":"h€llo 😀"}', '{"b":1}']);
    });
    it("strips one CR of a CRLF record and splits on LF only", async () => {
      const p = make({ maxRecordBytes: 1024, highWaterBytes: 1024 });
      p.input('a\r\nb\r\r\nc\u2028d\n');
      p.endInput();
      assert.deepEqual((await collect(p.transport)).map(text), ["a", "b\r", "c\u2028d"]);
    });
    it("discards an over-limit line through its newline and keeps going; the bound includes the newline", async () => {
      const p = make({ maxRecordBytes: 8, highWaterBytes: 1024 });
      p.input("1234567\n"); // 8 bytes with LF: fits
      p.input("12345678\n"); // 9 bytes: too large
      for (let i = 0; i < 100; i++) p.input("x".repeat(1000)); // long line in many chunks
      p.input("\nok\n");
      p.endInput();
      assert.deepEqual((await collect(p.transport)).map(text), ["1234567", "<too_large>", "<too_large>", "ok"]);
    });
    it("yields a final line without LF at EOF, and an over-limit one as too_large", async () => {
      const p = make({ maxRecordBytes: 8, highWaterBytes: 1024 });
      p.input("a\nlast");
      p.endInput();
      assert.deepEqual((await collect(p.transport)).map(text), ["a", "last"]);
      const q = make({ maxRecordBytes: 8, highWaterBytes: 1024 });
      q.input("a\n123456789");
      q.endInput();
      assert.deepEqual((await collect(q.transport)).map(text), ["a", "<too_large>"]);
    });
    it("honours output backpressure without dropping or reordering lines", async () => {
      const p = make({ maxRecordBytes: 1024, highWaterBytes: 4096 });
      p.stallOutput();
      let n = 0;
      while (!p.transport.pressured && n < 100_000) {
        p.transport.send(`line-${n++}-${"z".repeat(100)}`);
        p.transport.flush();
      }
      assert.ok(p.transport.pressured, "the transport reports pressure when the peer stops reading");
      let resolved = false;
      const w = p.transport.writable().then(() => (resolved = true));
      await new Promise((r) => setImmediate(r));
      assert.equal(resolved, false, "writable() waits while the peer is stalled");
      p.resumeOutput();
      await w;
      await p.transport.close();
      const lines = p.output().split("\n");
      assert.equal(lines.pop(), "");
      assert.equal(lines.length, n);
      lines.forEach((l, i) => assert.ok(l.startsWith(`line-${i}-`)));
    });
    it("close is idempotent and flushes everything queued", async () => {
      const p = make({ maxRecordBytes: 1024, highWaterBytes: 1024 });
      p.transport.send("one");
      p.transport.send("two");
      await Promise.all([p.transport.close(), p.transport.close()]);
      await p.transport.close();
      assert.equal(p.output(), "one\ntwo\n");
    });
  });
}
