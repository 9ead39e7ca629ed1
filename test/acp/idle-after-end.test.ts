/**
 * A prompt's answer means the session is idle: the turn's writer lease is released (another process may take the
 * session), a prompt sent the moment the answer arrives runs, and a mode change sent then applies to the next turn.
 * The runtime ends a turn (lease release, deferred config) after its terminal event; the answer waits for that
 * (`StartedTurn.done`), not only for the terminal event. Served in-process over Web streams, so the client acts on
 * the answer within a few event-loop turns of it. (With today's store the ending takes only microtasks, so the old
 * code passed these too; they pin the contract should ending a turn ever do I/O.)
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { serveAcp } from "../../src/protocols/acp/server.js";
import { Agent } from "../../src/runtime/agent.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { fakeSettings } from "../turns/helpers.js";

async function withAcp(fn: (agent: acp.ClientContext, cwd: string, fake: FakeProvider, asked: string[], home: string) => Promise<void>): Promise<void> {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "acp-idle-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "acp-idle-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify(fakeSettings(fake.baseUrl, { api: "openai-responses" })));
  const env = { PATH: process.env.PATH ?? "", MC_HOME: home };
  const toAgent = new TransformStream<Uint8Array, Uint8Array>();
  const toClient = new TransformStream<Uint8Array, Uint8Array>();
  const served = serveAcp({
    input: toAgent.readable,
    output: toClient.writable,
    deps: { home, cwd, env, version: "0", log: () => undefined, openUrl: () => undefined, runner: new Agent({ home, cwd, env }) },
  });
  const asked: string[] = [];
  const conn = acp
    .client({ name: "idle-test" })
    .onRequest("session/request_permission", ({ params }) => {
      asked.push(params.toolCall.toolCallId);
      return { outcome: { outcome: "selected", optionId: "allow_once" } };
    })
    .connect(acp.ndJsonStream(toAgent.writable, toClient.readable));
  try {
    await conn.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {}, clientInfo: { name: "idle-test", version: "0" } });
    await fn(conn.agent, cwd, fake, asked, home);
  } finally {
    await toAgent.writable.close().catch(() => undefined);
    await served;
    await fake.close();
  }
}

it("back-to-back prompts each run: the answer comes once the turn's lease has ended", () =>
  withAcp(async (agent, cwd, _fake, _asked, home) => {
    const { sessionId } = await agent.request("session/new", { cwd, mcpServers: [] });
    const lease = join(home, "session-locks", `${sessionId}.lease`);
    for (let i = 0; i < 10; i++) {
      const r = await agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `turn ${i}` }] });
      assert.equal(r.stopReason, "end_turn", `turn ${i}`);
      // Checked as the answer is handled: the turn's writer lease is already released (another process may take it).
      assert.equal(existsSync(lease), false, `turn ${i}: the session's writer lease is still held when the answer arrives`);
    }
  }));

it("a mode change sent the moment an answer arrives applies to the next turn", () =>
  withAcp(async (agent, cwd, fake, asked) => {
    const { sessionId } = await agent.request("session/new", { cwd, mcpServers: [] });
    await agent.request("session/set_mode", { sessionId, modeId: "full" });
    for (let i = 0; i < 4; i++) {
      fake.script([{ steps: [{ toolCall: { id: `w${i}`, name: "write", arguments: { path: `f${i}.txt`, content: "x" } } }] }, { steps: [{ text: "done" }] }]);
      const before = asked.length;
      assert.equal((await agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `write ${i}` }] })).stopReason, "end_turn");
      const expectAsk = i % 2 === 1; // the mode set right after the previous answer: ask after an even turn
      assert.equal(asked.length - before, expectAsk ? 1 : 0, `turn ${i} ran in mode ${expectAsk ? "ask" : "full"}`);
      // No await in between: the next request goes out as the answer is handled, while the turn's lease may still be ending.
      await agent.request("session/set_mode", { sessionId, modeId: i % 2 === 0 ? "ask" : "full" });
    }
  }));
