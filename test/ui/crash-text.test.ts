/**
 * The daemon is killed (SIGKILL) mid-answer under an open page, after Berth's runtime durably recorded text the host
 * had not checkpointed yet; it starts again on the same home. The page shows the turn ended with the continuity note
 * and the runtime's durable partial answer, once (docs/host.md, "Active turns across a host restart"). The spawned
 * daemon (`--berth-runtime`, loopback fake provider) and Debian's Chromium, as in restart.test.ts.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Browser } from "playwright-core";
import { until } from "../host/helpers.js";
import { browserSkipReason, openNewSession, patient, startDaemon, UI_TEST_MS, withBrowser, type Daemon } from "./rig.js";
import { OBSERVATION_GAP_MESSAGE } from "../../src/protocols/host/managed-schema.js";

const skip = browserSkipReason();

/** Whether some Berth session file (the runtime's durable store) holds `text`. */
function runtimeHolds(home: string, text: string): boolean {
  const dir = join(home, "sessions");
  try {
    return readdirSync(dir).some((n) => n.endsWith(".jsonl") && readFileSync(join(dir, n), "utf8").includes(text));
  } catch {
    return false;
  }
}

/** Whether the host's checkpoint of an active turn (any chat row) holds `text`. */
function checkpointHolds(home: string, text: string): boolean {
  const db = new Database(join(home, "host", "host.db"), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT extra FROM chats").all() as { extra: string | null }[]).some((r) => (r.extra ?? "").includes(text));
  } finally {
    db.close();
  }
}

describe("web UI: the daemon is killed mid-answer", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon | null = null;
  let browser: Browser;
  withBrowser(
    (b) => (browser = b),
    async () => void (await d?.stop()),
  );

  test("after the restart the page shows the runtime's durable partial answer once, ended with the continuity note", async (t) => {
    d = await startDaemon();
    const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
    try {
      await openNewSession(page, d.ready.ui);
      const first = "Head the host checkpointed. ";
      const second = "Tail only the runtime recorded.";
      let release: () => void = () => undefined;
      const held = new Promise<void>((r) => (release = r));
      d.fake.script([{ steps: [{ text: first }, { hold: held }, { text: second }, { waitForAbort: true }] }]);
      await page.getByLabel("Message").fill("tell me");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.active").getByText(first.trim()).waitFor();
      await until(() => checkpointHolds(d!.home, first), 15_000, "the host checkpointed the head");
      release();
      await page.locator(".turn.active").getByText(second).waitFor();
      await until(() => runtimeHolds(d!.home, second), 15_000, "the runtime's session file holds the tail");
      const exited = new Promise((r) => d!.proc.once("exit", r));
      d.proc.kill("SIGKILL");
      await exited;
      await d.fake.close();
      // On a loaded machine the host may have checkpointed the tail before the kill landed: the page must show the
      // same then (test/host/berth-crash-text.test.ts makes sure of the case where only the runtime had it).
      if (checkpointHolds(d.home, second)) t.diagnostic("the kill landed after the host checkpointed the tail");

      d = await startDaemon({ home: d.home });
      const turn = page.locator(".turn.done.st-error");
      await turn.locator(".err").getByText(OBSERVATION_GAP_MESSAGE).waitFor();
      assert.equal((await turn.locator(".md").allInnerTexts()).join("").trim(), (first + second).trim());
      assert.equal(await page.locator(".turn").count(), 1);
      assert.deepEqual(await page.locator(".turn .user-msg").allInnerTexts(), ["tell me"]);
    } finally {
      await page.close();
    }
  });
});
