/**
 * Keyboard only: Enter sends, Shift+Enter is a new line, the Send button and a tool's Approve/Deny work from the
 * keyboard, and focus is back in the message box after sending and after answering an approval (it stayed on the Send
 * button, and went to the page's body when the answered buttons went away, so the next message needed the mouse or a
 * long walk with Tab). The spawned daemon (`--berth-runtime`, loopback fake provider) and Debian's Chromium, as in
 * ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { AhpClient } from "../host/helpers.js";
import { newSession } from "../host/berth-rig.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { browserSkipReason, openNewSession, patient, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

/** What has the keyboard focus: its accessible label or its text. */
const focused = (page: Page): Promise<string> =>
  page.evaluate("(() => { const a = document.activeElement; return a === null || a === document.body ? 'body' : a.getAttribute('aria-label') ?? a.textContent.trim(); })()");

/** Shift+Tab from where the focus is until `name` has it (at most `max` presses). */
async function backTo(page: Page, name: string, max = 8): Promise<void> {
  for (let i = 0; i < max && (await focused(page)) !== name; i++) await page.keyboard.press("Shift+Tab");
  assert.equal(await focused(page), name, `${name} is reachable with Shift+Tab`);
}

describe("web UI: keyboard only", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("send with Enter or the Send button, Shift+Enter for a new line; focus returns to the box after sending", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await newSession(c, "ahp-session:/keys-send", d.cwd);
      await page.goto(d.ready.ui);
      await page.locator('[data-session="ahp-session:/keys-send"]').click();
      const box = page.getByLabel("Message");
      await box.waitFor();
      assert.equal(await focused(page), "Message", "a session opened from the list has the focus in its message box");
      await page.keyboard.type("line one");
      await page.keyboard.press("Shift+Enter");
      await page.keyboard.type("line two");
      await page.keyboard.press("Enter");
      await page.locator(".turn.done").getByText("echo: line one").waitFor();
      assert.deepEqual(await page.locator(".turn .user-msg").allInnerTexts(), ["line one\nline two"]);
      assert.equal(await focused(page), "Message");

      await page.keyboard.type("by the button");
      await page.keyboard.press("Tab");
      assert.equal(await focused(page), "Send");
      await page.keyboard.press("Enter");
      await page.locator(".turn.done").getByText("echo: by the button").waitFor();
      assert.equal(await focused(page), "Message", "focus is back in the box after Send");
      assert.equal(await box.inputValue(), "");
    } finally {
      c.close();
      await page.close();
    }
  });

  test("a session made with the New session dialog opens with the focus in its message box", async () => {
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await openNewSession(page, d.ready.ui);
      await page.getByLabel("Message").waitFor();
      await page.waitForFunction("document.activeElement?.getAttribute('aria-label') === 'Message'");
      await page.keyboard.type("typed at once");
      await page.keyboard.press("Enter");
      await page.locator(".turn.done").getByText("echo: typed at once").waitFor();
    } finally {
      await page.close();
    }
  });

  test("approve with Enter and deny with Space from the keyboard; focus returns to the box, the turn goes on", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await newSession(c, "ahp-session:/keys-approve", d.cwd);
      await page.goto(d.ready.ui);
      await page.locator('[data-session="ahp-session:/keys-approve"]').click();
      d.fake.script([
        { steps: [{ toolCall: { id: "k1", name: "write", arguments: { path: "keys.txt", content: "by keyboard" } } }] },
        { steps: [{ text: "approved it" }] },
        { steps: [{ toolCall: { id: "k2", name: "write", arguments: { path: "denied.txt", content: "no" } } }] },
        { steps: [{ text: "denied it" }] },
      ]);
      await page.getByLabel("Message").focus();
      await page.keyboard.type("write it");
      await page.keyboard.press("Enter");
      await page.locator('.tool[data-tool="k1"]').getByRole("button", { name: "Approve" }).waitFor();
      await backTo(page, "Approve");
      await page.keyboard.press("Enter");
      await page.locator(".turn.done").getByText("approved it").waitFor();
      assert.equal(await focused(page), "Message", "focus is back in the box after Approve");

      await page.keyboard.type("write another");
      await page.keyboard.press("Enter");
      await page.locator('.tool[data-tool="k2"]').getByRole("button", { name: "Deny" }).waitFor();
      await backTo(page, "Deny");
      await page.keyboard.press(" ");
      await page.locator(".turn.done").getByText("denied it").waitFor();
      assert.equal(await focused(page), "Message", "focus is back in the box after Deny");
    } finally {
      c.close();
      await page.close();
    }
  });
});
