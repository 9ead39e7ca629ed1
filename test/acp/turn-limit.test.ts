/**
 * Many sessions at once on one `berth acp`: it runs at most 16 prompt turns at the same time (one writer lease per
 * running turn, the store's per-process bound). A prompt past that is refused at once naming the cause and the fix,
 * not blamed on the session store, and the same prompt runs once a turn has ended. A `session/load` that must first
 * settle a turn a killed process left open needs a lease for that moment too: refused the same way at the bound.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type AcpRig, withAcpRig } from "./harness.js";
import { until } from "../sessions/crash-rig.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

const LIMIT = 16;

it(`${LIMIT} turns run at once; one more is -32600 saying so, and runs once one of them ended`, { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const ids = await Promise.all(Array.from({ length: LIMIT + 1 }, () => p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] }).then((r) => r.sessionId)));
  let release!: () => void;
  const hold = new Promise<void>((resolve) => (release = resolve));
  rig.fake.script(Array.from({ length: LIMIT }, () => ({ steps: [{ hold }, { text: "held turn done" }] })));
  const asked = rig.fake.requests.length;
  const held = ids.slice(0, LIMIT).map((sessionId) => p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "wait" }] }));
  await rig.fake.waitForRequests(asked + LIMIT); // every one of them admitted and asking the provider

  const last = ids[LIMIT]!;
  await assert.rejects(p.agent.request("session/prompt", { sessionId: last, prompt: [{ type: "text", text: "one more" }] }), (e: { code: number; message: string }) => {
    assert.equal(e.code, -32600);
    assert.equal(
      e.message,
      `Invalid request: this berth acp is already running ${LIMIT} prompt turns (in ${LIMIT} sessions), as many as it runs at once; wait for one of them to end (its stopReason) and send this prompt again`,
    );
    return true;
  });
  release();
  for (const t of held) assert.equal((await t).stopReason, "end_turn");
  assert.equal((await p.agent.request("session/prompt", { sessionId: last, prompt: [{ type: "text", text: "one more" }] })).stopReason, "end_turn");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it(`while ${LIMIT} turns run, a load that must first settle a crashed turn is -32600 saying so; it loads once one ended`, { timeout: 60_000 }, async () => {
  // A session whose berth acp was killed mid-answer: its last turn is open on disk.
  const q = rig.spawn();
  await q.initialize();
  const crashed = (await q.agent.request("session/new", { cwd: q.cwd, mcpServers: [] })).sessionId;
  rig.fake.script([{ steps: [{ text: "cut short" }, { hold: new Promise(() => undefined) }] }]);
  void q.agent.request("session/prompt", { sessionId: crashed, prompt: [{ type: "text", text: "long" }] }).catch(() => undefined);
  await q.until(() => q.updates.some((n) => n.update.sessionUpdate === "agent_message_chunk"), "the first chunk");
  await until("the partial answer on disk", () => readFileSync(join(rig.home, "sessions", `${crashed}.jsonl`), "utf8").includes("cut short"));
  q.child.kill("SIGKILL");
  await q.exited;

  const p = rig.spawn();
  await p.initialize();
  const ids = await Promise.all(Array.from({ length: LIMIT }, () => p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] }).then((r) => r.sessionId)));
  let release!: () => void;
  const hold = new Promise<void>((resolve) => (release = resolve));
  rig.fake.script(Array.from({ length: LIMIT }, () => ({ steps: [{ hold }, { text: "held turn done" }] })));
  const asked = rig.fake.requests.length;
  const held = ids.map((sessionId) => p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "wait" }] }));
  await rig.fake.waitForRequests(asked + LIMIT);

  await assert.rejects(p.agent.request("session/load", { sessionId: crashed, cwd: p.cwd, mcpServers: [] }), (e: { code: number; message: string }) => {
    assert.equal(e.code, -32600);
    assert.equal(
      e.message,
      `Invalid request: this berth acp is already running ${LIMIT} prompt turns, as many as it runs at once, and loading this session must first close the turn a Berth process that stopped left unfinished in it; wait for one of those turns to end (its stopReason) and send session/load again`,
    );
    return true;
  });
  assert.deepEqual(p.updatesOf(crashed), []);
  // A resume shows nothing, so it needs no lease: taken at the bound (its first prompt settles the turn).
  await p.agent.request("session/resume", { sessionId: crashed, cwd: p.cwd });
  release();
  for (const t of held) assert.equal((await t).stopReason, "end_turn");
  await p.agent.request("session/load", { sessionId: crashed, cwd: p.cwd, mcpServers: [] });
  assert.deepEqual(
    p.updatesOf(crashed).map((u) => (u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "user_message_chunk") && u.content.type === "text" ? u.content.text : u.sessionUpdate),
    ["long", "cut short", "\n\n[This reply was interrupted before it finished.]"],
  );
  assert.deepEqual(p.invalid, []);
  await p.end();
});
