/**
 * `berth acp` runs from its own code-cached script like the session commands (scripts/code-cache.mjs): an editor's
 * spawn, `initialize`, a new session and a prompt answered, from the cache and, with BERTH_CODE_CACHE=0, from the ES
 * module chunks. The script carries zod (the ACP SDK builds its schemas with it before `initialize` is answered), so
 * nothing of it is compiled from node_modules. Which path ran is read from BERTH_DEBUG_TIMING's `boot …` mark.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { REPO_ROOT } from "../helpers/paths.js";
import { COLD, bundled } from "../helpers/package-copy.js";

interface AcpRun {
  boot: string;
  stopReason: unknown;
  stderr: string;
}

/** initialize, session/new, one prompt over a fresh `berth acp`; the boot mark and the prompt's stop reason. */
function acpTurn(fake: FakeProvider, extraEnv: NodeJS.ProcessEnv = {}): Promise<AcpRun> {
  const dir = mkdtempSync(join(tmpdir(), "berth-cc-acp-"));
  writeFileSync(join(dir, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
  const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: dir, MC_HOME: dir, BERTH_DEBUG_TIMING: "1", ...extraEnv };
  const child = spawn(join(REPO_ROOT, "bin", "berth"), ["acp"], { env, cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
  const send = (m: unknown): void => void child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...(m as object) }) + "\n");
  let stderr = "";
  let buf = "";
  let stopReason: unknown;
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      buf += d;
      for (let k; (k = buf.indexOf("\n")) !== -1; ) {
        const m = JSON.parse(buf.slice(0, k)) as { id?: number; method?: string; result?: { sessionId?: string; stopReason?: string }; error?: unknown };
        buf = buf.slice(k + 1);
        if (m.method !== undefined) continue;
        if (m.id === 1 && m.result) send({ id: 2, method: "session/new", params: { cwd: dir, mcpServers: [] } });
        else if (m.id === 2 && m.result) send({ id: 3, method: "session/prompt", params: { sessionId: m.result.sessionId, prompt: [{ type: "text", text: "hello" }] } });
        else {
          stopReason = m.result?.stopReason ?? m.error;
          child.stdin.end();
        }
      }
    });
    send({ id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } });
    child.on("error", reject);
    child.on("close", () => {
      rmSync(dir, { recursive: true, force: true });
      resolve({ boot: /berth-timing \S+ (boot [^\n]*)/.exec(stderr)?.[1] ?? "(no boot mark)", stopReason, stderr });
    });
  });
}

test("berth acp runs from its code cache (zod in the script), and from the modules with BERTH_CODE_CACHE=0", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 60_000 }, async () => {
  const script = readFileSync(join(COLD, "berth-acp.cjs"), "latin1");
  assert.ok(!/require\("zod/.test(script), "zod is bundled into the acp script, not required from node_modules");
  assert.ok(script.includes("berth: ./stdio.js is not in dist/cold/berth-acp.cjs"), "the session commands are left out of it");
  const fake = await startFakeProvider({ loop: true });
  try {
    const cached = await acpTurn(fake);
    assert.equal(cached.boot, "boot code cache", cached.stderr);
    assert.equal(cached.stopReason, "end_turn", cached.stderr);
    const off = await acpTurn(fake, { BERTH_CODE_CACHE: "0" });
    assert.equal(off.boot, "(no boot mark)", off.stderr);
    assert.equal(off.stopReason, "end_turn", off.stderr);
  } finally {
    await fake.close();
  }
});
