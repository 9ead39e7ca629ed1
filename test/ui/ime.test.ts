/**
 * Typing through an input method (Japanese, Chinese, Korean): the Enter that picks a candidate ends the composition,
 * it must not send the half-typed message. Chromium's own IME path, driven over CDP (`Input.imeSetComposition`); the
 * spawned daemon (`--berth-runtime`, loopback fake provider) as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { AhpClient } from "../host/helpers.js";
import { newSession } from "../host/berth-rig.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { browserSkipReason, patient, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: input methods", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("Enter that confirms an IME candidate does not send; the Enter after it does", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    const page = patient(await browser.newPage());
    try {
      await newSession(c, "ahp-session:/ime", d.cwd);
      await page.goto(d.ready.ui);
      await page.locator('[data-session="ahp-session:/ime"]').click();
      const box = page.getByLabel("Message");
      await box.click();
      const cdp = await page.context().newCDPSession(page);
      await cdp.send("Input.imeSetComposition", { text: "にほんご", selectionStart: 4, selectionEnd: 4 });
      // The candidate is picked with Enter: the key goes to the page while the composition is open, then it commits.
      const enter = { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
      await cdp.send("Input.dispatchKeyEvent", { type: "rawKeyDown", ...enter });
      await cdp.send("Input.dispatchKeyEvent", { type: "keyUp", ...enter });
      await cdp.send("Input.insertText", { text: "日本語" });
      assert.equal(await box.inputValue(), "日本語", "the composed text stays in the box");
      assert.equal(await page.locator(".turn").count(), 0, "nothing was sent while composing");
      await box.press("End");
      await page.keyboard.type("で");
      await page.keyboard.press("Enter");
      await page.locator(".turn.done").getByText("echo: 日本語で").waitFor();
      assert.deepEqual(await page.locator(".turn .user-msg").allInnerTexts(), ["日本語で"], "one message, the whole one");
    } finally {
      c.close();
      await page.close();
    }
  });
});
