/**
 * The web UI's markdown renderer while an answer streams (ui/src/markdown.tsx, docs/ui.md "Long answers"): rendered
 * frame after frame into one component, the page equals a fresh render of the same text at every step, and a frame
 * builds elements only for what the new text can change. In Chromium, without a daemon (test/ui/md-harness.ts).
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { browserSkipReason, launchBrowser, UI_TEST_MS } from "./rig.js";
import { loadHarness } from "./md-harness.js";

const skip = browserSkipReason();

describe("web UI: markdown rendered while it streams", { skip, timeout: UI_TEST_MS }, () => {
  let browser: Browser;
  let page: Page;
  before(async () => {
    browser = await launchBrowser();
    page = await browser.newPage();
    await loadHarness(page);
  });
  after(async () => browser?.close());

  test("a list whose lines end in \\r (CRLF text) is rendered: the page hung in an endless loop", async () => {
    const html = await page.evaluate<string>(`md.fresh(${JSON.stringify("Steps:\r\n\r\n- one\r\n- two\r\n1. three\u2028four\r\n")})`);
    assert.match(html, /<ul><li>one\r<\/li><li>two\r<\/li><\/ul><ol><li>three\u2028four\r<\/li><\/ol>/);
  });
});
