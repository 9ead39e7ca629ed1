/**
 * With a client that advertises `fs` and `terminal`, Berth's tools work through the client: reads see the editor's
 * unsaved buffer, edits and writes land in the editor (not on disk), commands run in a client terminal shown with the
 * tool call. Without those capabilities, the same tools stay local and no fs/terminal request is sent.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAcpRig, type AcpRig } from "./harness.js";

let rig: AcpRig;
let cwd: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-work-"));
  writeFileSync(join(cwd, "a.txt"), "on disk\n");
});
after(async () => {
  await rig.close();
});

it("reads, edits, writes and commands go through the client when it advertises fs and terminal", async () => {
  const buffers = new Map([[join(cwd, "a.txt"), "unsaved buffer text\n"]]);
  const p = rig.spawn({ cwd, client: { buffers, terminals: true } });
  await p.initialize({ fs: { readTextFile: true, writeTextFile: true }, terminal: true });
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
  rig.fake.script([
    {
      steps: [
        { toolCall: { id: "r1", name: "read", arguments: { path: "a.txt" } } },
        { toolCall: { id: "e1", name: "edit", arguments: { path: "a.txt", old_string: "unsaved", new_string: "edited" } } },
        { toolCall: { id: "w1", name: "write", arguments: { path: "new.txt", content: "brand new" } } },
        { toolCall: { id: "b1", name: "bash", arguments: { command: "echo from-terminal" } } },
      ],
    },
    { steps: [{ text: "all done" }] },
  ]);
  const n = rig.fake.requests.length;
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "go" }] })).stopReason, "end_turn");

  const toolResults = rig.fake.requests[n + 1]!.body;
  assert.match(toolResults, /unsaved buffer text/, "the model saw the editor's buffer");
  assert.match(toolResults, /from-terminal/);
  assert.equal(buffers.get(join(cwd, "a.txt")), "edited buffer text\n");
  assert.equal(buffers.get(join(cwd, "new.txt")), "brand new");
  assert.equal(readFileSync(join(cwd, "a.txt"), "utf8"), "on disk\n", "the disk copy is the editor's business");
  assert.equal(existsSync(join(cwd, "new.txt")), false);

  const methods = p.received.filter((f) => typeof f["method"] === "string" && f["id"] !== undefined).map((f) => f["method"] as string);
  for (const m of ["fs/read_text_file", "fs/write_text_file", "terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"]) {
    assert.ok(methods.includes(m), `${m} was sent`);
  }
  const shown = p.updatesOf(sessionId).filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "b1");
  assert.ok(shown.some((u) => u.sessionUpdate === "tool_call_update" && u.content?.some((c) => c.type === "terminal" && c.terminalId === "term-1")));
  const last = shown[shown.length - 1]!;
  assert.ok(last.sessionUpdate === "tool_call_update" && last.status === "completed");
  assert.ok(p.terminals.get("term-1")?.released, "the terminal was released");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a client without fs and terminal gets no such requests; the tools run locally", async () => {
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
  rig.fake.script([
    { steps: [{ toolCall: { id: "r1", name: "read", arguments: { path: "a.txt" } } }, { toolCall: { id: "b1", name: "bash", arguments: { command: "echo local > local.txt" } } }] },
    { steps: [{ text: "ok" }] },
  ]);
  const n = rig.fake.requests.length;
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "go" }] })).stopReason, "end_turn");
  assert.match(rig.fake.requests[n + 1]!.body, /on disk/);
  assert.equal(readFileSync(join(cwd, "local.txt"), "utf8"), "local\n");
  assert.equal(p.received.filter((f) => /^(fs|terminal)\//.test(String(f["method"] ?? ""))).length, 0);
  assert.deepEqual(p.invalid, []);
  await p.end();
});
