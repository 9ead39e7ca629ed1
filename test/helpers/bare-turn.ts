/**
 * A tool-free turn with no session file (no writer, no history) on an `Agent`, asserted to complete: what the
 * provider-reuse tests run turn after turn while they watch the loopback server.
 */
import assert from "node:assert/strict";
import type { Agent, SelectionOverride } from "../../src/runtime/agent.js";

export function bareTurns(agent: Agent, cwd: string): (id: string, selection?: SelectionOverride) => Promise<void> {
  return async (id, selection) => {
    const out = await agent.runTurn({
      turnId: id,
      writer: null,
      history: null,
      cwd,
      prompt: "hi",
      signal: new AbortController().signal,
      noTools: true,
      sink: { delta: () => true, event: () => undefined },
      ...(selection !== undefined ? { selection } : {}),
    });
    assert.equal(out.status, "completed");
  };
}
