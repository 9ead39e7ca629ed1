/**
 * The New session dialog as a new user types into it: a directory whose name holds `#` is the directory the session
 * works in (not the one its name is cut at), and `~/…` or a relative path is refused in the dialog, saying what to
 * type. The spawned daemon (`--berth-runtime`, loopback fake provider) and Debian's Chromium, as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { AhpClient } from "../host/helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { browserSkipReason, patient, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: the New session dialog", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  const sessionCount = async (): Promise<number> => {
    const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle);
    try {
      return ((await c.request("listSessions", {})).result as { items: unknown[] }).items.length;
    } finally {
      c.close();
    }
  };
  /** Type `dir` into the dialog and press Create; the dialog's error, or "" when it closed. */
  const create = async (page: Page, dir: string): Promise<string> => {
    await page.getByRole("button", { name: "New session" }).click();
    const dialog = page.getByRole("dialog", { name: "New session" });
    await dialog.getByLabel("Working directory").fill(dir);
    await dialog.getByRole("button", { name: "Create" }).click();
    await Promise.race([dialog.locator(".err").waitFor(), dialog.waitFor({ state: "detached" })]);
    return (await dialog.count()) === 0 ? "" : await dialog.locator(".err").innerText();
  };

  test("a directory named with # is the session's directory; ~ and relative paths are refused with the fix", async () => {
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await page.goto(d.ready.ui);
      await page.locator(".list .bar").waitFor();
      await page.locator(".banner").waitFor({ state: "detached" });

      for (const typed of ["~/project", "project/sub"]) {
        const error = await create(page, typed);
        assert.match(error, /full path/, `${typed}: the dialog says what to type (it said ${JSON.stringify(error)})`);
        if (typed.startsWith("~")) assert.match(error, /~ is not expanded/);
        await page.getByRole("dialog", { name: "New session" }).getByRole("button", { name: "Close" }).click();
      }
      assert.equal(await sessionCount(), 0, "nothing was created from a path the daemon cannot use");

      // `a` exists too: a URI cut at the `#` names it, and the session would silently work there.
      const wanted = join(d.cwd, "release #2");
      mkdirSync(wanted);
      mkdirSync(join(d.cwd, "release "));
      assert.equal(await create(page, wanted), "");
      d.fake.script([{ steps: [{ toolCall: { id: "w1", name: "write", arguments: { path: "here.txt", content: "in the typed directory" } } }] }, { steps: [{ text: "written" }] }]);
      await page.getByLabel("Message").fill("write it");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".tool.tool-pending-confirmation").getByRole("button", { name: "Approve" }).click();
      await page.locator(".turn.done").getByText("written").waitFor();
      assert.equal(existsSync(join(d.cwd, "release ", "here.txt")), false, "the file went to the directory the name was cut at");
      assert.equal(readFileSync(join(wanted, "here.txt"), "utf8"), "in the typed directory");
    } finally {
      await page.close();
    }
  });
});
