/**
 * `berth open`: starts a detached daemon when none answers for this home, finds the running one
 * the next time, hands the opener the `file://` URL of an owner-only page that sends the browser on
 * to the UI URL (so the token is on no command line another user could read), and prints the URL
 * when no opener exists. The opener is a recording `xdg-open` script first on PATH; real headless
 * Chromium follows the page to the connected UI.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:http";
import { pathToFileURL } from "node:url";
import { BERTH_BIN } from "../helpers/paths.js";
import { until } from "../host/helpers.js";
import { pidAlive } from "../../src/store/process-alive.js";
import { browserSkipReason, launchBrowser, patient, UI_TEST_MS } from "./rig.js";

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [BERTH_BIN, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stdout.on("data", (b: Buffer) => (out += b.toString()));
    p.stderr.on("data", (b: Buffer) => (err += b.toString()));
    // "close", not "exit": only then has all of stdout and stderr been read.
    p.on("close", (code) => resolve({ code, out, err }));
  });
}

test("berth open: starts the daemon once, then finds it; the opener gets an owner-only page, never the token; no opener prints the URL", { timeout: UI_TEST_MS }, async () => {
  const home = mkdtempSync(join(tmpdir(), "open-home-"));
  const bin = mkdtempSync(join(tmpdir(), "open-bin-"));
  const opened = join(bin, "opened.txt");
  writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\necho "$1" >> "${opened}"\n`);
  chmodSync(join(bin, "xdg-open"), 0o755);
  const env = { PATH: `${bin}:${process.env.PATH}`, BERTH_HOME: home, MC_HOME: home, HOME: home, DISPLAY: ":0" };
  let pid = 0;
  try {
    const first = await run(["open"], env);
    assert.equal(first.code, 0, first.err);
    assert.match(first.err, /starting `berth daemon --berth-runtime`/);
    assert.equal(first.out, "", "with an opener nothing is printed on stdout");
    const endpoint = JSON.parse(readFileSync(join(home, "host", "endpoint.json"), "utf8")) as { pid: number; http: string; ui: string };
    pid = endpoint.pid;
    assert.ok(!JSON.stringify(endpoint).includes("#token"), "the discovery record holds no token");
    const token = readFileSync(join(home, "host", "token"), "utf8").trim();
    await until(() => existsSync(opened), 5000, "the opener to run");
    const url = `${endpoint.http}/#token=${token}`;
    const page = join(home, "host", "open.html");
    const handed = readFileSync(opened, "utf8").trim();
    assert.equal(handed, pathToFileURL(page).href, "the opener's command line names the page, not the UI URL");
    assert.ok(!handed.includes(token), "the token is on no command line");
    assert.equal(statSync(page).mode & 0o777, 0o600, "the page is as private as the token file");
    assert.ok(readFileSync(page, "utf8").includes(`url=${url}"`), "the page sends the browser on to the UI URL");
    assert.match(first.err, /so the token is on no command line/);
    assert.equal((await fetch(`${endpoint.http}/healthz`)).status, 200);
    assert.ok(!first.err.includes(token), "the token is never on stderr");

    const skip = browserSkipReason();
    if (skip) console.log(`# ${skip}`);
    else {
      const browser = await launchBrowser();
      try {
        const tab = patient(await browser.newPage());
        await tab.goto(handed);
        await tab.waitForURL(url);
        // Connected: the app is up (rendered with its "Connecting" banner) and the banner has gone.
        await tab.locator(".app").waitFor();
        await tab.locator(".banner").waitFor({ state: "detached" });
      } finally {
        await browser.close();
      }
    }

    const second = await run(["open"], env);
    assert.equal(second.code, 0, second.err);
    assert.doesNotMatch(second.err, /starting/, "the running daemon is found, not replaced");
    await until(() => readFileSync(opened, "utf8").trim().split("\n").length === 2, 5000, "the second open");
    assert.equal(readFileSync(opened, "utf8").trim().split("\n")[1], handed);

    const printed = await run(["open", "--no-browser"], env);
    assert.equal(printed.code, 0, printed.err);
    assert.equal(printed.out.trim(), url);

    const noOpener = await run(["open"], { ...env, PATH: "/nonexistent" });
    assert.equal(noOpener.code, 0, noOpener.err);
    assert.equal(noOpener.out.trim(), url);
    assert.match(noOpener.err, /^berth open: no browser opener found \(xdg-open\); open the URL above in a browser on this machine\n$/);

    // An SSH session: no display, so no opener is tried; the URL and how to forward the port instead.
    const port = new URL(endpoint.http).port;
    const headless = await run(["open"], { ...env, DISPLAY: "", WAYLAND_DISPLAY: "" });
    assert.equal(headless.code, 0, headless.err);
    assert.equal(headless.out.trim(), url);
    assert.equal(
      headless.err,
      `berth open: no graphical display here (DISPLAY and WAYLAND_DISPLAY are unset); open the URL above in a browser on this machine (over SSH, forward its port first: ssh -L ${port}:127.0.0.1:${port} <this host>, then open the URL on your own machine)\n`,
    );
    assert.equal(readFileSync(opened, "utf8").trim().split("\n").length, 2, "the opener was not run");

    // An opener that fails (xdg-open with no browser configured exits 3): the URL, and the opener's status.
    const failing = mkdtempSync(join(tmpdir(), "open-bin-"));
    writeFileSync(join(failing, "xdg-open"), "#!/bin/sh\nexit 3\n");
    chmodSync(join(failing, "xdg-open"), 0o755);
    const openerFailed = await run(["open"], { ...env, PATH: `${failing}:${process.env.PATH}` });
    assert.equal(openerFailed.code, 0, openerFailed.err);
    assert.equal(openerFailed.out.trim(), url);
    assert.match(openerFailed.err, /^berth open: the browser opener failed \(xdg-open exited with status 3\); open the URL above in a browser on this machine\n$/);

    assert.equal((await run(["open", "--bogus"], env)).code, 2);

    // The daemon killed (its endpoint record stays) and another program on its port, answering /healthz: berth open
    // does not take it for the daemon (it cannot prove it holds the token), starts a new one, and sends it nothing.
    process.kill(pid, "SIGKILL");
    await until(() => !pidAlive(pid), 10_000, "the killed daemon to be gone");
    const seen: string[] = []; // every request the impostor got (URL and headers)
    const impostor = createServer((req, res) => {
      seen.push(JSON.stringify([req.url, req.headers]));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, proof: "forged" }));
    });
    // The killed daemon's threads may still be exiting (its PID already a zombie) with the port held: until it is free.
    const bound = (): Promise<boolean> =>
      new Promise<boolean>((resolve, reject) => {
        const onError = (e: NodeJS.ErrnoException): void => (e.code === "EADDRINUSE" ? resolve(false) : reject(e));
        impostor.once("error", onError);
        impostor.listen(Number(port), "127.0.0.1", () => {
          impostor.off("error", onError);
          resolve(true);
        });
      });
    while (!(await bound())) await new Promise((r) => setTimeout(r, 20));
    const endpointFile = join(home, "host", "endpoint.json");
    const freshStart = async (): Promise<void> => {
      const fresh = await run(["open", "--no-browser"], env);
      assert.equal(fresh.code, 0, fresh.err);
      assert.match(fresh.err, /no daemon running for this home; starting/);
      const next = JSON.parse(readFileSync(endpointFile, "utf8")) as { pid: number; http: string };
      pid = next.pid;
      assert.notEqual(next.http, endpoint.http);
      assert.equal(fresh.out.trim(), `${next.http}/#token=${token}`);
    };
    try {
      // The recorded process is gone: the address is not even asked.
      await freshStart();
      assert.equal(seen.length, 0, "nothing was sent to the address");
      // Its PID reused by a live process (here: this test's): the address is asked, and fails the proof.
      process.kill(pid, "SIGKILL");
      await until(() => !pidAlive(pid), 10_000, "the second daemon to be gone");
      writeFileSync(endpointFile, JSON.stringify({ ...endpoint, pid: process.pid }));
      await freshStart();
      assert.ok(seen.length > 0, "the impostor was asked");
      for (const r of seen) assert.ok(!r.includes(token), `the token reached the impostor: ${r}`);
    } finally {
      const closed = new Promise<void>((r) => impostor.close(() => r()));
      impostor.closeAllConnections();
      await closed;
    }
  } finally {
    // Never this test's own PID (the forged record above names it): a SIGTERM to it would hide the failure.
    if (pid && pid !== process.pid) {
      process.kill(pid, "SIGTERM");
      await until(() => !pidAlive(pid), 10_000, "the daemon to exit");
    }
  }
});
