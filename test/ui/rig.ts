/**
 * Rig for the web UI tests: the real `bin/berth daemon --berth-runtime` (spawned) pointed at the
 * loopback fake provider, and Debian's Chromium driven by playwright-core. Where no Chromium is
 * installed the browser tests skip with a clear message (.ci/run installs it when it can, and
 * says so loudly when it cannot); BERTH_REQUIRE_BROWSER=1 turns the skip into a failure.
 */
import { after, before } from "node:test";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { FakeBackend, type Json } from "../host/helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN, REPO_ROOT } from "../helpers/paths.js";

export const CHROMIUM = process.env.BERTH_CHROMIUM ?? "/usr/bin/chromium";
export const ARTIFACTS = join(REPO_ROOT, "dist", "test-artifacts", "ui");
/** Committed screenshots (docs/ui/) are refreshed only when this is set. */
export const UPDATE_DOCS = process.env.BERTH_UPDATE_SCREENSHOTS === "1";

/** Why browser tests cannot run here, or false. With BERTH_REQUIRE_BROWSER=1 a missing Chromium is an error. */
export function browserSkipReason(): string | false {
  if (existsSync(CHROMIUM)) return false;
  const msg = `web UI browser tests skipped: no Chromium at ${CHROMIUM}; install it (apt-get install -y chromium, as .ci/run does) or set BERTH_CHROMIUM`;
  if (process.env.BERTH_REQUIRE_BROWSER === "1") throw new Error(msg);
  return msg;
}

/**
 * How long one Playwright wait may take before it fails. Playwright's own default (30 s) is too short
 * on a loaded 2-core CI machine; each wait still ends as soon as its condition holds.
 */
export const UI_WAIT_MS = 100_000;
/** Each UI test's overall bound: many waits in a row on a loaded machine. */
export const UI_TEST_MS = 240_000;
/** `ctx` (a browser context or page) with the generous wait bound as its default. */
export function patient<T extends { setDefaultTimeout(ms: number): void }>(ctx: T): T {
  ctx.setDefaultTimeout(UI_WAIT_MS);
  return ctx;
}

export async function launchBrowser(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    timeout: 60_000,
    // Playwright gives every launch a fresh temporary profile (it refuses --user-data-dir here).
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export interface Ready {
  ready: boolean;
  ahp: string;
  http: string;
  token: string;
  backend_socket: string;
  ui: string;
}
export interface Daemon {
  proc: ChildProcess;
  ready: Ready;
  fake: FakeProvider;
  home: string;
  cwd: string;
  stderr: () => string;
  stop(): Promise<void>;
}

/** `home`: an existing Berth home (a restart). */
export async function startDaemon(o: { home?: string } = {}): Promise<Daemon> {
  const fake = await startFakeProvider();
  const home = o.home ?? mkdtempSync(join(tmpdir(), "ui-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "ui-cwd-"));
  writeFileSync(
    join(home, "settings.json"),
    JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }),
  );
  const env = { ...process.env, BERTH_HOME: home, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const proc = spawn(process.execPath, [BERTH_BIN, "daemon", "--berth-runtime"], { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  proc.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const ready = await new Promise<Ready>((resolve, reject) => {
    let buf = "";
    proc.stdout.on("data", (b: Buffer) => {
      buf += b.toString();
      const nl = buf.indexOf("\n");
      if (nl !== -1) resolve(JSON.parse(buf.slice(0, nl)) as Ready);
    });
    proc.once("exit", (code) => reject(new Error(`daemon exited ${code}: ${err}`)));
  });
  return {
    proc,
    ready,
    fake,
    home,
    cwd,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await exited;
      }
      await fake.close();
    },
  };
}

/**
 * Starts a daemon and a browser before the enclosing suite's tests (handing both to `take`) and stops them after.
 */
export function withDaemonAndBrowser(take: (d: Daemon, browser: Browser) => void): void {
  let d: Daemon | undefined;
  let browser: Browser | undefined;
  before(async () => {
    [d, browser] = await Promise.all([startDaemon(), launchBrowser()]);
    take(d, browser);
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });
}

/**
 * Launches a browser before the enclosing suite's tests (handing it to `take`) and closes it after them, then runs
 * `cleanup` (for suites whose tests start and stop their own daemon).
 */
export function withBrowser(take: (browser: Browser) => void, cleanup: () => Promise<void> = () => Promise.resolve()): void {
  let browser: Browser | undefined;
  before(async () => {
    browser = await launchBrowser();
    take(browser);
  });
  after(async () => {
    await browser?.close();
    await cleanup();
  });
}

/** Opens the web UI at `url` in `page`, waits until it is connected (no banner) and makes a session with the dialog. */
export async function openNewSession(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.locator(".banner").waitFor({ state: "detached" });
  // Exact: a session still titled "New Session" in the list is a button whose name starts the same way.
  await page.getByRole("button", { name: "New session", exact: true }).click();
  await page.getByRole("dialog", { name: "New session" }).getByRole("button", { name: "Create" }).click();
}

/**
 * A page showing a new session of a fake backend (protocol version 4) registered with `d`: opened from the list, its
 * message box up. `ev` sends the backend's event for that session; close `be` and the page when done.
 */
export async function backendSessionPage(
  d: Daemon,
  browser: Browser,
  o: { sourceId: string; title: string },
): Promise<{ page: Page; be: FakeBackend; session: string; ev: (event: Json) => void }> {
  const page = patient(await browser.newPage({ viewport: { width: 1280, height: 800 } }));
  const { be, reg } = await FakeBackend.session({ backendSocket: d.ready.backend_socket } as unknown as HostHandle, { protocolVersion: 4, ...o });
  const session = reg.session as string;
  await page.goto(d.ready.ui);
  await page.locator(`[data-session="${session}"]`).click();
  await page.getByLabel("Message").waitFor();
  return { page, be, session, ev: (event: Json) => be.send({ type: "event", session, event }) };
}

/** Test-only network fault (an init script): the page's sockets are recorded, and new ones can be made to fail. */
export const SOCKET_TAP = `(() => {
  const Real = window.WebSocket;
  const tap = { socks: [], block: false, mute: false };
  window.__uiTest = tap;
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      super(tap.block ? String(url).replace(/\\/ahp$/, "/blocked") : url, protocols);
      tap.socks.push(this);
    }
    // A link that silently drops what the page sends (a sleeping laptop's half-open socket).
    send(data) {
      if (!tap.mute) super.send(data);
    }
  };
})();`;

export function artifactPath(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}
export function docsShot(name: string): string | undefined {
  if (!UPDATE_DOCS) return undefined;
  const dir = join(REPO_ROOT, "docs", "ui");
  mkdirSync(dir, { recursive: true });
  return join(dir, name);
}
