/** The callback-wait override read by the composition root (`BERTH_OPENAI_AUTH_CALLBACK_TIMEOUT_MS`). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { callbackTimeoutMsFromEnv } from "../../src/protocols/app-service/auth.js";
import { DEFAULT_CALLBACK_TIMEOUT_MS } from "../../src/runtime/auth/codex-login.js";

test("callback timeout override: positive integers, clamped to five minutes, anything else ignored", () => {
  // @req AUTH-TIMEOUT-02
  const read = (v: string | undefined) => callbackTimeoutMsFromEnv(v === undefined ? {} : { BERTH_OPENAI_AUTH_CALLBACK_TIMEOUT_MS: v });
  assert.equal(DEFAULT_CALLBACK_TIMEOUT_MS, 300_000);
  assert.equal(read(undefined), undefined);
  assert.equal(read("1"), 1);
  assert.equal(read("250"), 250);
  assert.equal(read("300000"), 300_000);
  assert.equal(read("300001"), 300_000);
  assert.equal(read("9".repeat(400)), 300_000);
  for (const bad of ["", "0", "000", "-5", "1.5", "1e3", " 250", "250 ", "0x10", "abc", "Infinity"]) assert.equal(read(bad), undefined, JSON.stringify(bad));
});
