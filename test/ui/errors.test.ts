/**
 * Failures as the web UI shows them: a tool call that failed reads as failed (its card said "completed", in green),
 * a provider that refuses the credential is named with the fix, and a turn failed in a session's other chat (not its
 * primary one) shows on the session's badges and that chat's tab. The spawned daemon (`--berth-runtime`, loopback
 * fake provider) and Debian's Chromium, as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { AhpClient } from "../host/helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
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

  test("a failed turn in a session's other chat shows on the session's badges and on that chat's tab", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle, ["ahp-root://"], "side-chat");
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      const session = "ahp-session:/ui-side-fail";
      assert.equal((await c.request("createSession", { channel: session, provider: "berth" })).result, null);
      const snap = (await c.request("subscribe", { channel: session })).result.snapshot;
      if (snap.state.lifecycle !== "ready") await c.action((e) => e.channel === session && e.action.type === "session/ready", "session/ready", 10_000);

      await page.goto(d.ready.ui);
      await page.locator(`[data-session="${session}"]`).click();
      await page.locator(".transcript").getByText("No messages yet.").waitFor();

      // Another client's chat of the same session fails its first turn while the page shows the primary chat.
      d.fake.script([{ status: 401 }]);
      const side = "ahp-chat:/ui-side-fail";
      const created = await c.request("createChat", { channel: session, chat: side, title: "Side", initialMessage: { text: "fail here", origin: { kind: "user" } } });
      assert.equal(created.result, null, JSON.stringify(created.error));
      await c.request("subscribe", { channel: side });
      await c.action((e) => e.channel === side && e.action.type === "chat/error", "the side chat's failure", 10_000);

      // It said "idle" in both places (the session's status was its primary chat's, in the daemon and the page).
      await page.locator(`.list [data-session="${session}"] .badge`, { hasText: /^error$/ }).waitFor();
      await page.locator(".session [data-status]", { hasText: /^error$/ }).waitFor();
      const tab = page.getByRole("navigation", { name: "Chats" }).getByRole("button", { name: /Side/ });
      await tab.locator(".badge", { hasText: /^error$/ }).waitFor();
      // The primary chat itself did not fail: its tab carries no mark.
      assert.equal(await page.getByRole("navigation", { name: "Chats" }).locator("button.on .badge").count(), 0);
    } finally {
      c.close();
      await page.close();
    }
  });
});
