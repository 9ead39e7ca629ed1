/**
 * The backend connection's outbox commits before it writes: `beforeWrite` (the host's store flush) runs before the
 * frames of a batch are handed to the socket, so an `event_ack` never leaves ahead of the state change it
 * acknowledges, even when the outbox's write was scheduled before the store's commit (an error reply earlier in the
 * same event-loop turn). A real loopback socket pair.
 * Its flow control: more than the bound waiting for a backend that does not read stops the host reading it (at the
 * bound, and one byte past), until it reads; 16 times the bound gives the connection up. Real Unix socket pairs.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type Socket } from "node:net";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BackendOutbox } from "../../src/protocols/host/backend-outbox.js";

async function socketPair(): Promise<{ server: Socket; client: Socket; close: () => void }> {
  const srv = createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const port = (srv.address() as { port: number }).port;
  const accepted = once(srv, "connection") as Promise<[Socket]>;
  const client = connect(port, "127.0.0.1");
  const [server] = await accepted;
  return { server, client, close: () => (client.destroy(), server.destroy(), srv.close()) };
}

it("every batch's commit runs before its bytes are written; an error frame queued first does not overtake it", async () => {
  const { server, client, close } = await socketPair();
  try {
    const commits: Array<{ written: number; committed: string[] }> = [];
    const queued: string[] = [];
    const durable: string[] = [];
    const outbox = new BackendOutbox(server, () => {
      durable.push(...queued.splice(0));
      commits.push({ written: server.bytesWritten, committed: [...durable] });
    });
    let got = "";
    client.setEncoding("utf8").on("data", (d: string) => (got += d));
    // An error reply first (it schedules the outbox's write), then a state change and its acknowledgement.
    outbox.push('{"type":"error","code":"validation_error","message":"x"}\n');
    queued.push("event 1");
    assert.equal(outbox.pushAck("s1", 1, "b1"), true);
    while (!got.includes('"sequence":1')) await once(client, "data");
    assert.equal(commits.length, 1);
    assert.equal(commits[0]!.written, 0, "the commit ran before any byte of the batch was written");
    assert.deepEqual(commits[0]!.committed, ["event 1"], "the acknowledged change was committed by then");
    const firstBatch = Buffer.byteLength(got);
    // The next batch: its own commit before its write, which follows the first batch's bytes.
    queued.push("event 2");
    assert.equal(outbox.pushAck("s1", 2, "b1"), true);
    outbox.flush();
    assert.equal(commits.length, 2);
    assert.equal(commits[1]!.written, firstBatch, "the second commit ran after the first batch's bytes, before its own");
    assert.deepEqual(commits[1]!.committed, ["event 1", "event 2"]);
    while (!got.includes('"sequence":2')) await once(client, "data");
    assert.deepEqual(
      got.trimEnd().split("\n").map((l) => (JSON.parse(l) as { type: string }).type),
      ["error", "event_ack", "event_ack"],
    );
    // Nothing queued: no commit, no write.
    outbox.flush();
    assert.equal(commits.length, 2);
  } finally {
    close();
  }
});

/** A Unix socket pair (the backend socket's kind): a peer that does not read fills fixed kernel buffers, then stops. */
async function unixPair(): Promise<{ server: Socket; client: Socket; close: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), "berth-outbox-"));
  const path = join(dir, "s.sock");
  const srv = createServer();
  srv.listen(path);
  await once(srv, "listening");
  const accepted = once(srv, "connection") as Promise<[Socket]>;
  const client = connect(path);
  const [server] = await accepted;
  return { server, client, close: () => (client.destroy(), server.destroy(), srv.close(), rmSync(dir, { recursive: true, force: true })) };
}

it("a backend not reading is not read either once more than the bound waits for it (at the bound, and one byte past)", async () => {
  const { server, client, close } = await unixPair();
  try {
    client.pause(); // the backend stops reading what the host sends
    const flow: string[] = [];
    const bound = 64 * 1024;
    const outbox = new BackendOutbox(server, () => undefined, { pause: () => flow.push("pause"), resume: () => flow.push("resume"), overflow: () => flow.push("overflow") }, bound);
    const tick = () => new Promise((r) => setImmediate(r));
    // Fill the kernel's buffers: from then on every byte pushed waits in the host.
    while (outbox.held === 0) {
      outbox.push("x".repeat(1023) + "\n");
      outbox.flush();
      await tick();
    }
    assert.ok(outbox.held <= 1024);
    outbox.push("y".repeat(bound - outbox.held - 1) + "\n");
    outbox.flush();
    assert.equal(outbox.held, bound);
    assert.deepEqual(flow, [], "at the bound the backend is still read");
    outbox.push("\n");
    outbox.flush();
    assert.equal(outbox.held, bound + 1);
    assert.deepEqual(flow, ["pause"], "one byte past it, reading stops");
    assert.equal(outbox.paused, true);
    // Once the backend reads, everything arrives and reading resumes.
    let got = 0;
    client.on("data", (d: Buffer) => (got += d.length));
    client.resume();
    while (outbox.held > 0) await once(client, "data");
    assert.deepEqual(flow, ["pause", "resume"]);
    assert.equal(outbox.paused, false);
  } finally {
    close();
  }
});

it("past 16 times the bound (commands a backend never reads) the connection is given up", async () => {
  const { server, client, close } = await unixPair();
  try {
    client.pause();
    const flow: string[] = [];
    const bound = 4096;
    const outbox = new BackendOutbox(server, () => undefined, { pause: () => flow.push("pause"), resume: () => flow.push("resume"), overflow: (n) => flow.push(`overflow ${n}`) }, bound);
    const tick = () => new Promise((r) => setImmediate(r));
    while (outbox.held === 0) {
      outbox.push("x".repeat(255) + "\n");
      outbox.flush();
      await tick();
    }
    outbox.push("y".repeat(16 * bound - outbox.held - 1) + "\n");
    outbox.flush();
    assert.deepEqual(flow, ["pause"], "at 16 times the bound: paused, kept");
    outbox.push("\n");
    outbox.flush();
    assert.deepEqual(flow, ["pause", `overflow ${16 * bound + 1}`], "one byte past it: given up");
  } finally {
    close();
  }
});
