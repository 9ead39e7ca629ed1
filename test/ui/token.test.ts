/**
 * The token leaves the address bar once the page has read it: what a user copies from there (to share a link, in a
 * bug report) or shows (a shared screen, a screenshot) no longer carries it. A reload of the same tab still works, and
 * a #token= URL opened in a tab without the token (or with a wrong one) is used at once;
 * the spawned daemon and Debian's Chromium, as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { browserSkipReason, patient, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: the token and the address bar", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("the URL loses its #token= at once; a reload reconnects; another tab of the bare URL asks for the token", async () => {
    const { token, http, ui } = d.ready;
    const ctx = patient(await browser.newContext());
    try {
      const page = patient(await ctx.newPage());
      await page.goto(ui);
      await page.locator(".list .bar").waitFor();
      await page.locator(".banner").waitFor({ state: "detached" });
      assert.equal(page.url(), `${http}/`, "the address bar shows the page without the token");
      assert.ok(!(await page.title()).includes(token));
      await page.reload();
      await page.locator(".list .bar").waitFor();
      await page.locator(".banner").waitFor({ state: "detached" });
      assert.equal(page.url(), `${http}/`);
      // What was copied from the address bar, opened elsewhere, does not log in.
      const other = patient(await ctx.newPage());
      await other.goto(page.url());
      await other.getByText("This page needs the daemon's token").waitFor();
      // A new URL with a token, opened in the tab that holds one, is the one used (here: a wrong one).
      await page.goto(`${http}/#token=wrong`);
      await page.getByText("The token in this page's address is not the daemon's").waitFor();
      assert.equal(page.url(), `${http}/`);
    } finally {
      await ctx.close();
    }
  });

  test("the URL pasted into a tab without the token, or with a wrong one, is used at once", async () => {
    const { http, ui } = d.ready;
    const page = patient(await browser.newPage());
    try {
      const connected = async () => {
        await page.locator(".list .bar").waitFor();
        await page.locator(".banner").waitFor({ state: "detached" });
      };
      await page.goto(`${http}/`);
      await page.getByText("This page needs the daemon's token").waitFor();
      // What that page says to do: open the printed URL. It differs only in its fragment (the browser does not load
      // the page again for that): the page used to stay as it was.
      await page.goto(ui);
      await connected();
      await page.goto(`${http}/#token=wrong`);
      await page.getByText("The token in this page's address is not the daemon's").waitFor();
      await page.goto(ui);
      await connected();
      assert.equal(page.url(), `${http}/`);
    } finally {
      await page.close();
    }
  });
});
