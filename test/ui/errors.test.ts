/**
 * Failures as the web UI shows them: a tool call that failed reads as failed (its card said "completed", in green),
 * and a provider that refuses the credential is named with the fix. The spawned daemon (`--berth-runtime`, loopback
 * fake provider) and Debian's Chromium, as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { browserSkipReason, patient, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: failures", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("a failed tool call is marked failed; a rejected credential names the cause and the fix", async () => {
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await page.goto(d.ready.ui);
      await page.getByRole("button", { name: "New session" }).click();
      await page.getByRole("dialog", { name: "New session" }).getByRole("button", { name: "Create" }).click();
      d.fake.script([{ steps: [{ toolCall: { id: "r1", name: "read", arguments: { path: "no-such-file.txt" } } }] }, { steps: [{ text: "it is not there" }] }]);
      await page.getByLabel("Message").fill("read the file");
      await page.getByRole("button", { name: "Send" }).click();
      const done = page.locator(".turn.done").last();
      await done.getByText("it is not there").waitFor();
      const card = done.locator('.tool[data-tool="r1"]');
      assert.equal(await card.locator("summary .badge").innerText(), "failed");
      await card.locator("summary").click();
      assert.match(await card.locator(".tool-sec pre").last().innerText(), /no-such-file\.txt: ENOENT/);

      d.fake.script([{ status: 401 }]);
      await page.getByLabel("Message").fill("again");
      await page.getByRole("button", { name: "Send" }).click();
      const failed = page.locator(".turn.done").last().locator(".err");
      await failed.waitFor();
      assert.match(await failed.innerText(), /credential is missing or was rejected.*HTTP 401.*sign in again or set the API key/);
      // The failure stays visible after the turn: the session's badge and its entry in the list say "error" (the
      // session's badge went back to "idle").
      await page.locator(".list .item.on .badge", { hasText: /^error$/ }).waitFor();
      await page.locator(".session [data-status]", { hasText: /^error$/ }).waitFor();
    } finally {
      await page.close();
    }
  });
});
