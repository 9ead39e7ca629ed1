/**
 * The page never hands its token to a server that cannot prove it holds it (core/ui-proof.ts). The daemon stops; a
 * program of another local user takes its port; the open page, reconnecting, asks that program for the proof, gets
 * a forged one, and sends it nothing more (no WebSocket, no token in any header), saying why in its banner. When the
 * real daemon comes back (on its last port, as a restart without --listen does), the page proves it and reconnects.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { Browser } from "playwright-core";
import { browserSkipReason, launchBrowser, patient, startDaemon, UI_TEST_MS, type Daemon } from "./rig.js";

const skip = browserSkipReason();

describe("web UI: an impostor on the daemon's port gets no token", { skip, timeout: UI_TEST_MS }, () => {
  let browser: Browser;
  let d: Daemon | null = null;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  test("a reconnecting page sends nothing past the proof request to a server that cannot prove it holds the token", async () => {
    d = await startDaemon();
    const { token, http, ui } = d.ready;
    const port = Number(new URL(http).port);
    const page = patient(await browser.newPage());
    await page.goto(ui);
    await page.locator(".app").waitFor();
    await page.locator(".banner").waitFor({ state: "detached" });

    await d.stop();
    // Another user's server on the same port: it answers the proof request with a forgery and records everything.
    const seen: IncomingMessage[] = [];
    let proofs = 0;
    let wake = (): void => undefined;
    const impostor = createServer((req, res) => {
      seen.push(req);
      if (req.url?.startsWith("/ui-proof?")) proofs++;
      wake();
      res.writeHead(req.url?.startsWith("/ui-proof?") ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify({ proof: "forged-proof-forged-proof-forged-proof-forg" }));
    });
    impostor.on("upgrade", (req: IncomingMessage, socket) => {
      seen.push(req);
      wake();
      socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      impostor.once("error", reject);
      impostor.listen(port, "127.0.0.1", () => resolve());
    });
    try {
      // Two proof requests (the page asked, was refused, backed off and asked again: one that sends the token after
      // a failed proof would have done so before its second request), or a WebSocket upgrade (a page that does not
      // ask at all).
      const upgrades = (): IncomingMessage[] => seen.filter((r) => (r.headers.upgrade ?? "") !== "");
      while (proofs < 2 && upgrades().length === 0) await new Promise<void>((r) => (wake = r));
      assert.deepEqual(upgrades().map((r) => r.url), [], "no WebSocket was opened to the impostor");
      for (const r of seen) assert.ok(!JSON.stringify([r.url, r.headers]).includes(token), `the token reached the impostor in ${r.url}`);
      await page.locator(".banner").getByText("not the daemon that served this page").waitFor();
    } finally {
      const closed = new Promise<void>((r) => impostor.close(() => r()));
      impostor.closeAllConnections();
      await closed;
    }

    // The real daemon restarted (same home, same token; no --listen: it takes its last port again, now free): the
    // page proves it and reconnects by itself.
    d = await startDaemon({ home: d.home });
    assert.equal(new URL(d.ready.http).port, String(port));
    await page.locator(".banner").waitFor({ state: "detached" });
  });
});
