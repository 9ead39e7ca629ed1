/**
 * The page picks up where it was: a reload in the middle of a streamed answer or of a pending approval shows each once
 * (and the approval still works), a reconnection after the page subscribed to a session with older activity
 * replays nothing twice, and one after the open session was disposed closes its view. The spawned daemon (`--berth-runtime`, loopback fake provider) and Debian's Chromium, as in
 * ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { AhpClient } from "../host/helpers.js";
import { ended, newSession, startTurn } from "../host/berth-rig.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { browserSkipReason, patient, SOCKET_TAP, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: reload and reconnect", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("a session opened after another client's turn: a reconnection does not replay that turn onto its snapshot", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    const ctx = patient(await browser.newContext({ viewport: { width: 1280, height: 800 } }));
    await ctx.addInitScript(SOCKET_TAP);
    const page = patient(await ctx.newPage());
    try {
      const { chat } = await newSession(c, "ahp-session:/resume-gap", d.cwd);
      await page.goto(d.ready.ui);
      await page.locator(".banner").waitFor({ state: "detached" });
      // Another client (a terminal, a chat channel) uses the session while the page shows only the list.
      startTurn(c, chat, "elsewhere", "asked elsewhere");
      assert.equal((await ended(c, "elsewhere")).action.type, "chat/turnComplete");
      await page.locator('[data-session="ahp-session:/resume-gap"]').click();
      await page.locator(".turn.done").getByText("echo: asked elsewhere").waitFor();
      // The connection drops (a network change) and comes back: the page resumes from what it has seen.
      await page.evaluate("globalThis.__uiTest.socks.at(-1).close()");
      await page.locator(".banner").getByText("Disconnected").waitFor();
      await page.locator(".banner").waitFor({ state: "detached" });
      await page.getByLabel("Message").fill("asked here");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.done").getByText("echo: asked here").waitFor();
      assert.deepEqual(await page.locator(".turn .user-msg").allInnerTexts(), ["asked elsewhere", "asked here"]);
    } finally {
      c.close();
      await ctx.close();
    }
  });

  test("a session disposed while the page was disconnected: its open view closes once the page is back", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    const ctx = patient(await browser.newContext({ viewport: { width: 1280, height: 800 } }));
    await ctx.addInitScript(SOCKET_TAP);
    const page = patient(await ctx.newPage());
    try {
      await newSession(c, "ahp-session:/resume-gone", d.cwd);
      await page.goto(d.ready.ui);
      await page.locator('[data-session="ahp-session:/resume-gone"]').click();
      await page.getByText("No messages yet.").waitFor();
      await page.evaluate("(() => { globalThis.__uiTest.block = true; globalThis.__uiTest.socks.at(-1).close(); })()");
      await page.locator(".banner").getByText("Disconnected").waitFor();
      // Removed by another client meanwhile: root/sessionRemoved has no serverSeq, so no replay carries it.
      const r = await c.request("disposeSession", { channel: "ahp-session:/resume-gone" });
      assert.equal(r.result, null, JSON.stringify(r.error));
      await page.evaluate("globalThis.__uiTest.block = false");
      await page.locator(".banner").waitFor({ state: "detached" });
      await page.getByText("Choose a session, or create one.").waitFor();
      await page.locator('[data-session="ahp-session:/resume-gone"]').waitFor({ state: "detached" });
    } finally {
      c.close();
      await ctx.close();
    }
  });

  test("a reload mid-answer and mid-approval shows each once; approving after the reload runs the tool", async () => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await newSession(c, "ahp-session:/resume-reload", d.cwd);
      await page.goto(d.ready.ui);
      const open = () => page.locator('[data-session="ahp-session:/resume-reload"]').click();
      await open();
      d.fake.script([
        { steps: [{ text: "partial answer, " }, { text: "still going" }, { waitForAbort: true }] },
        { steps: [{ text: "then a file: " }, { toolCall: { id: "w1", name: "write", arguments: { path: "after-reload.txt", content: "approved after a reload" } } }] },
        { steps: [{ text: "written" }] },
      ]);
      await page.getByLabel("Message").fill("stream something");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.active").getByText("still going").waitFor();
      await page.reload();
      await open();
      const active = page.locator(".turn.active");
      await active.getByText("still going").waitFor();
      assert.equal(await active.locator(".md").innerText(), "partial answer, still going");
      assert.equal(await page.locator(".turn .user-msg").count(), 1);
      await page.getByRole("button", { name: "Cancel" }).click();
      await page.locator(".turn.done.st-cancelled").waitFor();

      await page.getByLabel("Message").fill("write it");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".tool.tool-pending-confirmation").getByRole("button", { name: "Approve" }).waitFor();
      await page.reload();
      await open();
      const card = page.locator(".tool.tool-pending-confirmation");
      await card.getByRole("button", { name: "Approve" }).waitFor();
      assert.equal(await page.locator(".tool").count(), 1, "the pending approval is shown once");
      assert.equal(await page.locator(".turn.active .md").innerText(), "then a file: ");
      await card.getByRole("button", { name: "Approve" }).click();
      await page.locator(".turn.done").getByText("written").waitFor();
      assert.equal(readFileSync(join(d.cwd, "after-reload.txt"), "utf8"), "approved after a reload");
      assert.deepEqual(await page.locator(".turn .user-msg").allInnerTexts(), ["stream something", "write it"]);
    } finally {
      c.close();
      await page.close();
    }
  });
});
