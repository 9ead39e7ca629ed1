/**
 * The backend connection's outbox commits before it writes: `beforeWrite` (the host's store flush) runs before the
 * frames of a batch are handed to the socket, so an `event_ack` never leaves ahead of the state change it
 * acknowledges, even when the outbox's write was scheduled before the store's commit (an error reply earlier in the
 * same event-loop turn). A real loopback socket pair.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type Socket } from "node:net";
import { once } from "node:events";
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
