/**
 * A `berth daemon` asked to stop (SIGTERM) while an AHP client has stopped reading: the daemon must still finish its
 * shutdown (flush running turns' checkpoints, close the store, release the lock) within its own 5 s deadline and exit
 * 0. Real process, real sockets: a fake backend over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { AhpClient, FakeBackend, tempHome, until } from "./helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const bin = fileURLToPath(new URL("../../../bin/berth", import.meta.url));

test("finding: a daemon stopped while an AHP client was not reading missed its shutdown deadline and exited 1; it exits 0", async () => {
  const proc: ChildProcess = spawn(process.execPath, [bin, "daemon", "--listen", "127.0.0.1:0", "--no-berth-runtime"], {
    env: { ...process.env, BERTH_HOME: tempHome() },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  proc.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
  proc.stdout!.on("data", (b: Buffer) => (stdout += b.toString()));
  let code: number | null | undefined;
  proc.once("exit", (c) => (code = c));
  try {
    await until(() => stdout.includes("\n") || code !== undefined, 20_000, "the ready line");
    const ready = JSON.parse(stdout.split("\n")[0]!) as Record<string, string>;
    const h = { ahpUrl: ready.ahp, token: ready.token, backendSocket: ready.backend_socket } as unknown as HostHandle;
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "shutdown" });
    const session = reg.session as string;
    const { c: stalled } = await AhpClient.init(h, [session], "stalled");
    const { c: writer } = await AhpClient.init(h, [], "writer");
    stalled.ws.pause();
    // More than its socket buffers can take: bytes wait in the daemon for the client that does not read.
    for (let i = 0; i < 256; i++) writer.dispatch(session, { type: "session/titleChanged", title: "t".repeat(64 * 1024), bad: 1 });
    await writer.request("ping");
    proc.kill("SIGTERM");
    await until(() => code !== undefined, 20_000, "the daemon's exit");
    assert.equal(code, 0, `a clean shutdown: ${stderr}`);
    assert.doesNotMatch(stderr, /shutdown deadline passed/);
    assert.equal(writer.closed, true);
    assert.equal(writer.closeCode, 1001, "a reading client still gets the close frame");
    stalled.ws.terminate();
    be.close();
  } finally {
    if (code === undefined) proc.kill("SIGKILL");
  }
});
