/**
 * Per-turn resources do not outlive their use: a replaced MCP configuration stops the old servers once no turn
 * holds them (not only at service exit).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { fakeSettings, startRig, startTurn, waitTerminal } from "./helpers.js";

const MCP_FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

/** Command lines of `pid`'s child processes. */
function children(pid: number): string[] {
  const out: string[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) out.push(readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0").join(" "));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

async function until(what: string, f: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

it("a replaced MCP configuration stops its servers once no turn holds them", async () => {
  const mcp = (tag: string) => ({ fixture: { command: process.execPath, args: [MCP_FIXTURE, tag], env: {} } });
  const rig = await startRig({ settings: { mcp: mcp("cfg-a") } });
  const pid = rig.svc.child.pid!;
  const running = (tag: string): boolean => children(pid).some((c) => c.includes(MCP_FIXTURE) && c.includes(tag));
  try {
    await startTurn(rig.svc, "one", "r1");
    assert.equal((await waitTerminal(rig.svc, "r1")).at(-1)!.payload.status, "completed");
    assert.ok(running("cfg-a"));
    writeFileSync(join(rig.svc.home, "settings.json"), JSON.stringify(fakeSettings(rig.fake.baseUrl, { mcp: mcp("cfg-b") })));
    await startTurn(rig.svc, "two", "r2");
    assert.equal((await waitTerminal(rig.svc, "r2")).at(-1)!.payload.status, "completed");
    await until("the replaced MCP server exits", () => !running("cfg-a"));
    assert.ok(running("cfg-b"), "the current configuration's server keeps running between turns");
  } finally {
    await rig.close();
  }
});
