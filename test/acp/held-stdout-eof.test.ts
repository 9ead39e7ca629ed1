/**
 * The editor closes `berth acp`'s stdin while it still holds stdout open without reading it, and a write is still
 * pending (a text chunk larger than the pipe): `berth acp` ends as at any EOF (the running turn cancelled, its
 * terminal record written) and exits 0, instead of waiting for ever on a write nobody will read.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";
import { type AcpRig, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

it("stdin closed while stdout is held unread with a write pending: the turn is recorded cancelled and berth acp exits 0", { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-eof-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  // One text delta larger than the pipe and this end's read buffer together: once the client stops reading at its
  // frame, that write cannot finish.
  rig.fake.script([{ steps: [{ text: "x".repeat(512 * 1024) }, { text: "never shown" }] }]);
  p.holdOutputAt((start) => start.includes('"agent_message_chunk"'));
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "talk" }] });
  prompt.catch(() => undefined);
  await p.until(() => p.held, "the client stopped reading at the text chunk");
  // stdout stays open and unread: only stdin ends.
  p.child.stdin.end();
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  const records = readFileSync(join(rig.home, "sessions", `${sessionId}.jsonl`), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; status?: string; text?: string });
  assert.deepEqual(records.at(-1), { ...records.at(-1), kind: "terminal", status: "cancelled" });
  assert.ok(records.some((r) => JSON.stringify(r).includes("talk")), "the prompt is stored");
});

it("stdin closed by an editor that never reads stdout at all (answers pile up in the pipe): berth acp exits 0", { timeout: 30_000 }, async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-acp-eof-"));
  const child = spawn(BERTH_BIN, ["acp"], { env: { PATH: process.env["PATH"], HOME: home, MC_HOME: home }, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  child.stdout.pause(); // never read
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on("close", (code, signal) => resolve([code, signal])));
  // Answers far larger than the pipe: each refused session/new is answered with ~150 bytes.
  const requests = [{ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } }];
  for (let i = 1; i <= 3000; i++) requests.push({ jsonrpc: "2.0", id: i, method: "session/new", params: { cwd: "relative", mcpServers: [] } } as never);
  try {
    child.stdin.end(requests.map((r) => JSON.stringify(r) + "\n").join(""));
    assert.deepEqual(await exited, [0, null], stderr);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
});
