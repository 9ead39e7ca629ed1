/**
 * Optional: `agent_codex` driving the real Codex CLI (on PATH, or `node_modules/.bin/codex` of this checkout)
 * against the loopback fake provider, through a private CODEX_HOME whose config.toml names the fake as a
 * Responses-API model provider without auth. Skipped, with the reason, when Codex is not installed: the suite
 * never downloads it.
 */
import assert from "node:assert/strict";
import { accessSync, constants, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { it } from "node:test";
import { REPO_ROOT } from "../helpers/paths.js";
import { spawnStdio, startRig, type Msg } from "./client.js";

function findCodex(): string | null {
  const dirs = [...(process.env["PATH"] ?? "").split(delimiter), join(REPO_ROOT, "node_modules", ".bin")];
  for (const d of dirs) {
    if (d === "") continue;
    try {
      accessSync(join(d, "codex"), constants.X_OK);
      return join(d, "codex");
    } catch {
      // not here
    }
  }
  return null;
}

const codex = findCodex();
const skip = codex === null ? "the Codex CLI is not installed (put `codex` on PATH or run `npm install --no-save @openai/codex` to run this test)" : false;

it("agent_codex runs the real Codex CLI against the fake provider", { skip }, async () => {
  const rig = await startRig();
  const adapterHome = join(rig.home, "adapters", "codex");
  mkdirSync(adapterHome, { recursive: true, mode: 0o700 });
  writeFileSync(
    join(adapterHome, "config.toml"),
    [
      'model = "fake-model"',
      'model_provider = "berthfake"',
      'approval_policy = "never"',
      'sandbox_mode = "read-only"',
      "[model_providers.berthfake]",
      'name = "Berth loopback fake"',
      `base_url = "${rig.fake.baseUrl}/v1"`,
      'wire_api = "responses"',
      "",
    ].join("\n"),
  );
  const cwd = mkdtempSync(join(tmpdir(), "codex-real-ws-"));
  const { client: c, exited } = spawnStdio({ ...rig.env, PATH: `${dirname(codex!)}${delimiter}${process.env["PATH"] ?? ""}`, NO_PROXY: "127.0.0.1" });
  try {
    const s = await c.open({}, cwd);
    rig.fake.script([{ steps: [{ toolCall: { id: "call_real", name: "agent_codex", arguments: { prompt: "say the word berth-codex-check", timeout_seconds: 300 } } }] }]);
    const from = c.frames.length;
    const turn = c.turn(s.session_id, "ask the real codex");
    const a = await c.waitFor((m) => m.type === "approval.requested", from, "approval.requested");
    c.request({ type: "approval.resolve", session_id: a.session_id, approval_id: a.approval_id, approved: true });
    const r = await turn;
    const tc = r.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_real")!;
    const out = JSON.parse(tc.output as string) as Msg;
    assert.equal(out.agent, "codex");
    assert.equal(out.status, "completed", JSON.stringify(out));
    assert.equal(out.exit_code, 0);
    assert.equal(out.session, "codex-1", "Codex reported its thread");
    const fromCodex = rig.fake.requests.filter((q) => q.api === "openai-responses" && q.body.includes("berth-codex-check"));
    assert.ok(fromCodex.length >= 1, "Codex asked the loopback provider");
  } finally {
    c.end();
    await exited;
    await rig.fake.close();
  }
});
