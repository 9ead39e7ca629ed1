/**
 * The daemon stops and starts again under an open page: the banner says what happened and what to do, and once the
 * daemon is back the page shows the same transcript (nothing twice, nothing missing) and goes on working. The
 * spawned daemon (`--berth-runtime`, loopback fake provider) and Debian's Chromium, as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { browserSkipReason, openNewSession, patient, startDaemon, UI_TEST_MS, withBrowser, type Daemon } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: the daemon restarts under an open page", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon | null = null;
  let browser: Browser;
  withBrowser(
    (b) => (browser = b),
    async () => void (await d?.stop()),
  );

  test("the banner names the stop and the fix; after the restart the transcript is whole and the session works", async () => {
    d = await startDaemon();
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await openNewSession(page, d.ready.ui);
      await page.getByLabel("Message").fill("before the restart");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.done").getByText("echo: before the restart").waitFor();

      await d.stop();
      const banner = page.locator(".banner[data-conn]");
      // Shut down on purpose (close code 1001), then nothing listens: the banner says so, and how to start it again.
      await banner.getByText("berth daemon").waitFor();
      assert.match(await banner.innerText(), /nothing answers at this address/);
      assert.match(await banner.innerText(), /start it again with `berth daemon` or `berth open`/);

      // Sent while it is down: the page says it was not sent and keeps it in the box.
      await page.getByLabel("Message").fill("while it was down");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".notice").getByText("Your message was not sent: the page is not connected to the daemon").waitFor();
      assert.equal(await page.getByLabel("Message").inputValue(), "while it was down");

      d = await startDaemon({ home: d.home });
      await banner.waitFor({ state: "detached" });
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.done").getByText("echo: while it was down").waitFor();
      await page.getByLabel("Message").fill("after the restart");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.done").getByText("echo: after the restart").waitFor();
      assert.deepEqual(await page.locator(".turn.done .user-msg").allInnerTexts(), ["before the restart", "while it was down", "after the restart"]);
    } finally {
      await page.close();
    }
  });
});
