/**
 * Requests Berth sends the editor and then no longer waits for (a cancelled command's `terminal/wait_for_exit`,
 * `terminal/kill`, `terminal/release`, …) do not pile up when the editor never answers them: each one Berth stops
 * waiting for is withdrawn with `$/cancel_request` and settled on Berth's side at once (the SDK forgets it), and at
 * most `MAX_UNAWAITED` requests whose answers no turn waits for stay outstanding per connection.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { MAX_UNAWAITED } from "../../src/protocols/acp/unawaited.js";
import { acpWire } from "../../src/protocols/acp/wire.js";
import { type AcpAgentProcess, type AcpRig, type Frame, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

/** Berth's requests to the editor that the editor has not answered and Berth has not withdrawn. */
function outstanding(p: AcpAgentProcess): Frame[] {
  const answered = new Set(p.sent.filter((f) => f["method"] === undefined && f["id"] !== undefined).map((f) => JSON.stringify(f["id"])));
  const withdrawn = new Set(p.received.filter((f) => f["method"] === "$/cancel_request").map((f) => JSON.stringify(f["params"]?.requestId)));
  return p.received.filter((f) => typeof f["method"] === "string" && f["id"] !== undefined && !answered.has(JSON.stringify(f["id"])) && !withdrawn.has(JSON.stringify(f["id"])));
}

it(`cancelled commands in an editor that never answers its terminal requests leave at most ${MAX_UNAWAITED} requests outstanding`, { timeout: 120_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-withdrawn-"));
  const p = rig.spawn({ cwd, client: { terminals: true, unanswered: ["terminal/wait_for_exit", "terminal/kill", "terminal/release", "terminal/output"] } });
  try {
    await p.initialize({ terminal: true });
    const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
    await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
    const turns = MAX_UNAWAITED + 4;
    for (let i = 0; i < turns; i++) {
      rig.fake.script([{ steps: [{ toolCall: { id: `b${i}`, name: "bash", arguments: { command: "sleep 600" } } }] }, { steps: [{ text: "unused" }] }]);
      const waits = p.received.filter((f) => f["method"] === "terminal/wait_for_exit").length;
      const turn = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `sleep ${i}` }] });
      await p.until(() => p.received.filter((f) => f["method"] === "terminal/wait_for_exit").length > waits, "the wait_for_exit request");
      await p.agent.notify("session/cancel", { sessionId });
      assert.equal((await turn).stopReason, "cancelled");
      rig.fake.unscript();
    }
    // A command's terminal is released last (after its wait_for_exit was withdrawn and its kill sent).
    await p.until(() => p.received.filter((f) => f["method"] === "terminal/release").length === turns, "every terminal released");
    const left = outstanding(p);
    // Every wait_for_exit was withdrawn once its command was cancelled; the kills and releases nobody waits for are
    // bounded (3 requests a turn otherwise, for ever).
    assert.deepEqual(left.filter((f) => f["method"] === "terminal/wait_for_exit"), []);
    assert.ok(left.length <= MAX_UNAWAITED, `${left.length} requests outstanding: ${left.map((f) => f["method"]).join(", ")}`);
    assert.deepEqual(p.invalid, []);
    assert.deepEqual(await p.end(), { code: 0, signal: null });
  } finally {
    for (const t of p.terminals.values()) t.kill();
  }
});

it("a request Berth withdraws is forgotten by the SDK at once (its pending list does not grow), and a late answer is dropped quietly", async () => {
  const toAgent = new TransformStream<Uint8Array, Uint8Array>();
  const fromAgent = new TransformStream<Uint8Array, Uint8Array>();
  const c = acp.agent({ name: "t" }).connect(acpWire(fromAgent.writable, toAgent.readable));
  const pending = (): number => (c as unknown as { connection: { pendingResponses: Map<unknown, unknown> } }).connection.pendingResponses.size;
  const lines: Array<Record<string, unknown>> = [];
  let seen: () => void = () => undefined;
  void (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of fromAgent.readable) {
      buf += decoder.decode(chunk, { stream: true });
      for (let i = buf.indexOf("\n"); i !== -1; i = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
        seen();
      }
    }
  })();
  const until = async (pred: () => boolean): Promise<void> => {
    while (!pred()) await new Promise<void>((r) => (seen = r));
  };
  for (let i = 0; i < 50; i++) {
    const ctl = new AbortController();
    const r = c.client.request("terminal/wait_for_exit", { sessionId: "s", terminalId: `t${i}` }, { cancellationSignal: ctl.signal, stopWaitingOnCancel: true });
    r.catch(() => undefined);
    ctl.abort();
  }
  await until(() => lines.filter((l) => l["method"] === "$/cancel_request").length === 50);
  assert.equal(pending(), 0);
  // The editor answers one of them after all: nothing is reported, nothing changes. (The line after it is answered
  // once the answer before it was read.)
  const reported: unknown[] = [];
  const error = console.error;
  console.error = (...a: unknown[]) => void reported.push(a);
  try {
    const writer = toAgent.writable.getWriter();
    const first = lines.find((l) => l["method"] === "terminal/wait_for_exit")!;
    await writer.write(new TextEncoder().encode(JSON.stringify({ jsonrpc: "2.0", id: first["id"], result: { exitCode: 0 } }) + "\nnot json\n"));
    await until(() => lines.some((l) => l["id"] === null));
    assert.deepEqual(reported, []);
    assert.equal(pending(), 0);
    await writer.close();
  } finally {
    console.error = error;
  }
  await c.closed;
});

it("the editor's late answer to any withdrawn request, however many came after it, is dropped without a stderr line", async () => {
  const toAgent = new TransformStream<Uint8Array, Uint8Array>();
  const fromAgent = new TransformStream<Uint8Array, Uint8Array>();
  const c = acp.agent({ name: "t" }).connect(acpWire(fromAgent.writable, toAgent.readable));
  const lines: Array<Record<string, unknown>> = [];
  let seen: () => void = () => undefined;
  void (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of fromAgent.readable) {
      buf += decoder.decode(chunk, { stream: true });
      for (let i = buf.indexOf("\n"); i !== -1; i = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
        seen();
      }
    }
  })();
  const until = async (pred: () => boolean): Promise<void> => {
    while (!pred()) await new Promise<void>((r) => (seen = r));
  };
  // More withdrawn requests than any fixed memory of them would hold (1024 before).
  const n = 1100;
  for (let i = 0; i < n; i++) {
    const ctl = new AbortController();
    const r = c.client.request("terminal/wait_for_exit", { sessionId: "s", terminalId: `t${i}` }, { cancellationSignal: ctl.signal, stopWaitingOnCancel: true });
    r.catch(() => undefined);
    ctl.abort();
  }
  await until(() => lines.filter((l) => l["method"] === "$/cancel_request").length === n);
  // A request Berth still waits for is answered as ever.
  const live = c.client.request("terminal/output", { sessionId: "s", terminalId: "live" });
  await until(() => lines.some((l) => l["method"] === "terminal/output"));
  const reported: unknown[] = [];
  const error = console.error;
  console.error = (...a: unknown[]) => void reported.push(a);
  try {
    const writer = toAgent.writable.getWriter();
    const first = lines.find((l) => l["method"] === "terminal/wait_for_exit")!;
    const asked = lines.find((l) => l["method"] === "terminal/output")!;
    const answers = [
      { jsonrpc: "2.0", id: first["id"], result: { exitCode: 0 } },
      { jsonrpc: "2.0", id: 999_999, result: {} },
      { jsonrpc: "2.0", id: asked["id"], result: { output: "ok", truncated: false } },
    ];
    await writer.write(new TextEncoder().encode(answers.map((a) => JSON.stringify(a) + "\n").join("")));
    assert.deepEqual(await live, { output: "ok", truncated: false });
    assert.deepEqual(reported, []);
    await writer.close();
  } finally {
    console.error = error;
  }
  await c.closed;
});
