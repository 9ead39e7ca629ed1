/**
 * An editor that stops reading (`berth acp … | head -1`, a crashed client that still holds stdin): the writes to a
 * closed stdout fail with EPIPE, and `berth acp` ends as it does at the editor's EOF (running turns cancelled, exit 0)
 * instead of dying on an unhandled stream error with a stack trace.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";

it("a stdout closed by the editor ends berth acp with exit 0 and no stack trace, mid-turn too", async () => {
  const fake = await startFakeProvider();
  try {
    const home = mkdtempSync(join(tmpdir(), "acp-epipe-"));
    writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
    const child = spawn(BERTH_BIN, ["acp"], { env: { PATH: process.env["PATH"], HOME: home, MC_HOME: home }, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
    const send = (m: object): void => void child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on("close", (code, signal) => resolve([code, signal])));
    let buf = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      buf += d;
      for (let k; (k = buf.indexOf("\n")) !== -1; ) {
        const m = JSON.parse(buf.slice(0, k)) as { id?: number; method?: string; result?: { sessionId?: string } };
        buf = buf.slice(k + 1);
        if (m.id === 1) send({ id: 2, method: "session/new", params: { cwd: home, mcpServers: [] } });
        else if (m.id === 2) send({ id: 3, method: "session/prompt", params: { sessionId: m.result!.sessionId, prompt: [{ type: "text", text: "long answer 20000" }] } });
        else if (m.method === "session/update") {
          // The turn is streaming: the editor goes away without a word (stdin stays open).
          child.stdout.destroy();
          return;
        }
      }
    });
    send({ id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } });
    const [code, signal] = await exited;
    assert.deepEqual([code, signal], [0, null], stderr);
    assert.doesNotMatch(stderr, /Unhandled|EPIPE|at .*\(/, "no stack trace");
  } finally {
    await fake.close();
  }
});
