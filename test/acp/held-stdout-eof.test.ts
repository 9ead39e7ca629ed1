/**
 * The editor closes `berth acp`'s stdin while it still holds stdout open without reading it, and a write is still
 * pending (a text chunk larger than the pipe): `berth acp` ends as at any EOF (the running turn cancelled, its
 * terminal record written) and exits 0, instead of waiting for ever on a write nobody will read.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAcpRig, type AcpRig } from "./harness.js";

let rig: AcpRig;
before(async () => {
  rig = await startAcpRig();
});
after(async () => {
  await rig.close();
});

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
