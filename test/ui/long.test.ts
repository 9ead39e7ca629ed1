/**
 * Long tool text in the web UI: a tool's output at the host's limit (1 MiB) and a large input are shown by their head
 * and tail with a note saying how much was left out, and in full on request. An external backend on the spawned
 * daemon's backend socket and Debian's Chromium, as in ui.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Browser } from "playwright-core";
import { backendSessionPage, browserSkipReason, UI_TEST_MS, type Daemon, withDaemonAndBrowser } from "./rig.js";

const skip = browserSkipReason();
/** The most characters a backend's tool output may have (the host refuses more). */
const MAX_OUTPUT = 1_048_576;

describe("web UI: long tool text", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  withDaemonAndBrowser((x, b) => ((d = x), (browser = b)));

  test("1 MiB of output and a large input: the card keeps head and tail, counts the lines cut, shows all on request", async () => {
    const { page, be, ev } = await backendSessionPage(d, browser, { sourceId: "ui-long", title: "Long output" });
    try {
      const line = (i: number) => `line ${String(i).padStart(6, "0")} of a long build log\n`; // 32 characters
      const output = Array.from({ length: MAX_OUTPUT / 32 }, (_, i) => line(i)).join("");
      assert.equal(output.length, MAX_OUTPUT);
      const content = "x".repeat(99) + "\n";
      const input = JSON.stringify({ path: "big.txt", content: content.repeat(2_000) });
      ev({ type: "agent_started", turnId: "L1" });
      ev({ type: "tool_started", toolCallId: "big", toolName: "write", input });
      ev({ type: "tool_completed", toolCallId: "big", toolName: "write", output, isError: false });
      ev({ type: "text_delta", text: "after the tool" });
      ev({ type: "settled", cancelled: false });
      await page.locator(".turn.done").getByText("after the tool").waitFor();

      const card = page.locator('.tool[data-tool="big"]');
      await card.locator("summary").click();
      const [inPre, outPre] = [card.locator(".tool-sec pre").nth(0), card.locator(".tool-sec pre").nth(1)];
      const shownOut = (await outPre.textContent())!;
      const note = /… ([\d,]+) lines not shown …/.exec(shownOut);
      assert.ok(note, `no note of what was cut in ${shownOut.length} characters of output`);
      assert.ok(shownOut.length < 30_000, `the card holds ${shownOut.length} characters of output`);
      assert.ok(shownOut.startsWith(line(0)) && shownOut.endsWith(line(MAX_OUTPUT / 32 - 1)));
      const shownLines = shownOut.match(/line \d{6} of/g)!.length;
      assert.equal(shownLines + Number(note[1]!.replaceAll(",", "")), MAX_OUTPUT / 32, "the note counts exactly the lines not shown");
      // The input the user judges is cut the same way, and says so.
      assert.match((await inPre.textContent())!, /… [\d,]+ (lines|characters) not shown …/);
      const pageText = await page.evaluate<number>("document.body.textContent.length");
      assert.ok(pageText < 80_000, `the page holds ${pageText} characters`);

      await card.getByRole("button", { name: "Show all" }).nth(1).click();
      await outPre.getByText(line(20_000).trim()).waitFor();
      assert.equal(await outPre.textContent(), output);
      assert.equal(await card.getByRole("button", { name: "Show all" }).count(), 1, "the input is still cut");
    } finally {
      be.close();
      await page.close();
    }
  });
});
