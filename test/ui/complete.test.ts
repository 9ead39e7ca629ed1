/**
 * A turn that completes stays on the page as it was: the active turn and the completed turn it becomes are one
 * transcript entry. An external backend on the spawned daemon's backend socket and Debian's Chromium, as in
 * ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { backendSessionPage, browserSkipReason, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: a turn completing", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("keeps the answer's elements and the reasoning the user opened: it was mounted anew, collapsed", async () => {
    const { page, be, ev } = await backendSessionPage(d, browser, { sourceId: "ui-complete", title: "Completing" });
    try {
      ev({ type: "agent_started", turnId: "C1" });
      ev({ type: "thinking_delta", text: "Weighing the options." });
      ev({ type: "text_delta", text: "First paragraph of the answer.\n\nSecond" });
      const reasoning = page.locator(".turn.active .reasoning");
      await reasoning.locator("summary").click();
      await reasoning.getByText("Weighing the options.").waitFor();
      const first = page.locator(".turn.active .md p").first();
      await first.getByText("First paragraph").waitFor();
      await first.evaluate((el) => ((el as unknown as { berthMark: boolean }).berthMark = true));

      ev({ type: "text_delta", text: " paragraph." });
      ev({ type: "settled", cancelled: false });
      const done = page.locator(".turn.done");
      await done.getByText("Second paragraph.").waitFor();
      assert.equal(await done.locator(".reasoning").getAttribute("open"), "", "the reasoning the user opened is still open");
      const same = await done.locator(".md p").first().evaluate((el) => (el as unknown as { berthMark?: boolean }).berthMark === true);
      assert.ok(same, "the answer's first paragraph is the element that was on the page, not a new one");
    } finally {
      be.close();
      await page.close();
    }
  });
});
