/**
 * `BERTH_MCP_STARTUP_WAIT_MS` (runtime/agent.ts `mcpStartupWaitOf`): how long a turn's first request waits for MCP
 * servers still starting when the door sets no wait of its own. Whole milliseconds from 0 to 600,000; anything else
 * leaves the 5 s default.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { MCP_STARTUP_WAIT_MS, mcpStartupWaitOf } from "../../src/runtime/agent.js";

it("unset, empty or not a whole number of milliseconds: the default", () => {
  assert.equal(MCP_STARTUP_WAIT_MS, 5000);
  for (const v of [undefined, "", " 10", "10 ", "-1", "1.5", "1e3", "0x10", "ten", "١٢"]) {
    assert.equal(mcpStartupWaitOf(v === undefined ? {} : { BERTH_MCP_STARTUP_WAIT_MS: v }), 5000, String(v));
  }
});

it("0 up to 600,000 ms is taken; one past the bound is ignored", () => {
  assert.equal(mcpStartupWaitOf({ BERTH_MCP_STARTUP_WAIT_MS: "0" }), 0);
  assert.equal(mcpStartupWaitOf({ BERTH_MCP_STARTUP_WAIT_MS: "30000" }), 30_000);
  assert.equal(mcpStartupWaitOf({ BERTH_MCP_STARTUP_WAIT_MS: "600000" }), 600_000);
  assert.equal(mcpStartupWaitOf({ BERTH_MCP_STARTUP_WAIT_MS: "600001" }), 5000);
  assert.equal(mcpStartupWaitOf({ BERTH_MCP_STARTUP_WAIT_MS: "1000000" }), 5000);
});
