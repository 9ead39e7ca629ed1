/**
 * Many sessions at once on one `berth acp`: it runs at most 16 prompt turns at the same time (one writer lease per
 * running turn, the store's per-process bound). A prompt past that is refused at once naming the cause and the fix,
 * not blamed on the session store, and the same prompt runs once a turn has ended.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { startAcpRig, type AcpRig } from "./harness.js";

let rig: AcpRig;
before(async () => {
  rig = await startAcpRig();
});
after(async () => {
  await rig.close();
});

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
