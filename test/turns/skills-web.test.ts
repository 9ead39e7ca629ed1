/**
 * Skills and web_fetch through a real turn of the spawned service: the skills list reaches the provider's system
 * prompt, read_skill returns the SKILL.md as the tool result, and web_fetch's production policy refuses loopback.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startRig, startTurn, waitTerminal } from "./helpers.js";

it("a turn lists skills, reads one with read_skill, and web_fetch refuses loopback in production", async () => {
  const userHome = mkdtempSync(join(tmpdir(), "berth-user-"));
  const rig = await startRig({ svc: { env: { HOME: userHome } } });
  const local = createServer((_q, res) => res.end("must not be reached"));
  await new Promise<void>((r) => local.listen(0, "127.0.0.1", r));
  let hits = 0;
  local.on("request", () => hits++);
  try {
    const skillDir = join(userHome, ".claude", "skills", "release");
    mkdirSync(skillDir, { recursive: true });
    writeFileSync(join(skillDir, "SKILL.md"), "---\nname: release-notes\ndescription: Write release notes from git history.\n---\nStep 1: run git log.\n");
    mkdirSync(join(rig.svc.cwd!, ".agents", "skills", "lint"), { recursive: true });
    writeFileSync(join(rig.svc.cwd!, ".agents", "skills", "lint", "SKILL.md"), "---\nname: lint\ndescription: Lint the project.\n---\nnpm run check\n");
    const url = `http://127.0.0.1:${(local.address() as AddressInfo).port}/`;
    rig.fake.script([
      { steps: [{ toolCall: { id: "s1", name: "read_skill", arguments: { name: "release-notes" } } }, { toolCall: { id: "w1", name: "web_fetch", arguments: { url } } }] },
      { steps: [{ text: "ok" }] },
    ]);
    await startTurn(rig.svc, "write the notes", "t1");
    const ev = await waitTerminal(rig.svc, "t1");
    assert.equal(ev.at(-1)!.payload.status, "completed");
    const first = rig.fake.requests[0]!.body;
    assert.match(first, /- release-notes: Write release notes from git history\./);
    assert.match(first, /- lint: Lint the project\./);
    const tools = ((rig.fake.requests[0]!.json as { tools: Array<{ function: { name: string } }> }).tools ?? []).map((t) => t.function.name);
    assert.ok(tools.includes("read_skill") && tools.includes("web_fetch"));
    assert.ok(!tools.includes("chat_attach"), "chat_attach is offered only to chat-channel sessions");
    const second = rig.fake.requests[1]!.body;
    assert.match(second, /Step 1: run git log\./);
    assert.match(second, /web_fetch: refused: 127\.0\.0\.1 is not a public address \(loopback\)/);
    assert.equal(hits, 0);
    const toolActs = ev.filter((e) => e.event === "turn.activity" && e.payload.activity.kind === "tool").map((e) => [e.payload.activity.tool_name, e.payload.activity.status]);
    assert.deepEqual(toolActs, [
      ["read_skill", "running"],
      ["read_skill", "completed"],
      ["web_fetch", "running"],
      ["web_fetch", "failed"],
    ]);
  } finally {
    await rig.close();
    local.close();
  }
});
