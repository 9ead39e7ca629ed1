/**
 * `berth open [--no-browser]`: find the running daemon of this home (its `host/endpoint.json`: its
 * process alive, and the server at its address proving it holds the token), or start
 * `berth daemon --berth-runtime` detached, then open the web UI in the user's browser
 * (`xdg-open` / `open` / `start`). With `--no-browser`, no graphical display, no
 * opener, or an opener that fails, the UI URL (token in the fragment) is printed on stdout for the user to open.
 *
 * The opener is never handed the URL itself: a process's command line is readable by every local
 * user (`/proc/<pid>/cmdline`, `ps`), and the opener passes it on to the browser's. It gets the
 * `file://` URL of `host/open.html`, an owner-only page that sends the browser on to the UI.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { spawnBerth } from "../client/spawn-berth.js";
import { writeFileAtomic } from "../store/atomic-file.js";
import { pidAlive } from "../store/process-alive.js";
import { uiProof } from "../protocols/host/ui-guard.js";
import { prepareHome } from "../store/state-root.js";
import { readEndpoint } from "./endpoint-file.js";

const START_TIMEOUT_MS = 20_000;

/**
 * True when the server at `http` proves it holds `token` (core/ui-proof.ts), as the web UI checks before it sends
 * the token. Answering `/healthz` is not enough: the daemon recorded there may have been killed (its record stays)
 * and another local user's program may now listen on its port, to receive the token in the URL opened next.
 */
async function provesToken(http: string, token: string): Promise<boolean> {
  const nonce = randomBytes(24).toString("base64url");
  try {
    const r = await fetch(`${http}/ui-proof?nonce=${nonce}`, { signal: AbortSignal.timeout(1500) });
    const proof = r.ok ? ((await r.json()) as { proof?: unknown }).proof : undefined;
    return proof === uiProof(token, Number(new URL(http).port), nonce);
  } catch {
    return false;
  }
}

function readToken(stateDir: string): string | null {
  try {
    return readFileSync(join(stateDir, "token"), "utf8").trim();
  } catch {
    return null;
  }
}

/** The running daemon's UI base URL (no token), or null when none answers as this home's daemon. */
async function findDaemon(stateDir: string): Promise<string | null> {
  const rec = readEndpoint(stateDir);
  const token = rec !== null && pidAlive(rec.pid) ? readToken(stateDir) : null;
  return rec !== null && token !== null && (await provesToken(rec.http, token)) ? rec.ui : null;
}

/** Start a detached daemon (logs to `host/daemon.log`) and resolve with its ready line's UI URL. */
function startDaemon(stateDir: string): Promise<string> {
  const bin = fileURLToPath(new URL("../../../bin/berth", import.meta.url));
  mkdirSync(stateDir, { recursive: true, mode: 0o700 }); // a fresh home: the daemon tightens it again
  const logFd = openSync(join(stateDir, "daemon.log"), "a", 0o600);
  // The launcher's credential handoff: the daemon's tools cannot read the keys from its environ.
  const child = spawnBerth(bin, ["daemon", "--berth-runtime"], process.env, { detached: true, stdio: ["ignore", "pipe", logFd] });
  return new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => fail(new Error(`the daemon did not become ready within ${START_TIMEOUT_MS / 1000} s; see ${join(stateDir, "daemon.log")}`)), START_TIMEOUT_MS);
    const fail = (e: Error) => {
      clearTimeout(timer);
      reject(e);
    };
    child.once("error", (e) => fail(new Error(`cannot start the daemon: ${e.message}`)));
    child.once("exit", (code) => fail(new Error(`the daemon exited (status ${code}) before it was ready; see ${join(stateDir, "daemon.log")}`)));
    child.stdout!.on("data", (b: Buffer) => {
      buf += b.toString();
      const nl = buf.indexOf("\n");
      if (nl === -1) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      try {
        const ready = JSON.parse(buf.slice(0, nl)) as { ui?: unknown };
        if (typeof ready.ui !== "string") throw new Error("no ui field");
        // The daemon prints nothing more on stdout; let it run on its own.
        child.stdout!.destroy();
        child.unref();
        resolve(ready.ui.replace(/#.*$/, ""));
      } catch {
        reject(new Error("the daemon's ready line could not be read"));
      }
    });
  });
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;" };

/**
 * Write `host/open.html` (0600, in the owner-only state directory: as private as `host/token`),
 * a page that sends the browser on to `url`, and return its `file://` URL.
 */
async function writeRedirectPage(stateDir: string, url: string): Promise<string> {
  const path = join(stateDir, "open.html");
  const href = url.replace(/[&"<>]/g, (c) => HTML_ESCAPES[c]!);
  const page =
    `<!doctype html>\n<meta charset="utf-8">\n<meta name="referrer" content="no-referrer">\n<title>Berth</title>\n` +
    `<meta http-equiv="refresh" content="0;url=${href}">\n<p>Opening the Berth web UI&hellip; <a href="${href}">continue</a></p>\n`;
  await writeFileAtomic(path, page, 0o600);
  return pathToFileURL(path).href;
}

function opener(): [string, string[]] {
  if (process.platform === "darwin") return ["open", []];
  if (process.platform === "win32") return ["cmd", ["/c", "start", ""]];
  return ["xdg-open", []];
}

/**
 * How long the opener may run before it counts as having opened the page: `xdg-open` hands the URL to a running
 * browser and exits at once (its status says whether that worked), but one that starts the browser may wait for it.
 */
const OPENER_WAIT_MS = 3000;

/** Why no browser can be opened here, or null: on Linux and the BSDs a browser needs a graphical session. */
function noDisplay(env: NodeJS.ProcessEnv): string | null {
  if (process.platform === "darwin" || process.platform === "win32") return null;
  return (env["DISPLAY"] ?? "") === "" && (env["WAYLAND_DISPLAY"] ?? "") === "" ? "no graphical display here (DISPLAY and WAYLAND_DISPLAY are unset)" : null;
}

/** Hands `url` to the platform's opener: null once it opened it (or still runs after `OPENER_WAIT_MS`), else why not. */
function launch(url: string): Promise<string | null> {
  const [cmd, args] = opener();
  return new Promise((resolve) => {
    const p = spawn(cmd, [...args, url], { detached: true, stdio: "ignore" });
    const timer = setTimeout(() => {
      p.removeAllListeners("exit");
      p.unref();
      resolve(null);
    }, OPENER_WAIT_MS);
    p.once("error", () => {
      clearTimeout(timer);
      resolve(`no browser opener found (${cmd})`);
    });
    p.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve(code === 0 ? null : `the browser opener failed (${cmd} ${signal !== null ? `was killed by ${signal}` : `exited with status ${code}`})`);
    });
  });
}

export async function runOpen(argv: string[]): Promise<number> {
  let browser = true;
  for (const a of argv) {
    if (a === "--no-browser") browser = false;
    else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: berth open [--no-browser]\n  starts or finds `berth daemon` for this home and opens its web UI\n");
      return 0;
    } else {
      process.stderr.write(`berth open: unknown argument ${a}; berth open --help lists the options\n`);
      return 2;
    }
  }
  // The state root is checked as every door checks it, before anything is written there (host/daemon.log) and
  // before a daemon is started only to refuse it.
  const { home, problem } = prepareHome(process.env);
  if (problem !== null) {
    process.stderr.write(`berth open: ${problem}\n`);
    return 1;
  }
  const stateDir = join(home, "host");
  let base: string | null;
  try {
    base = await findDaemon(stateDir);
    if (!base) {
      process.stderr.write("berth open: no daemon running for this home; starting `berth daemon --berth-runtime`\n");
      base = await startDaemon(stateDir);
    }
  } catch (e) {
    process.stderr.write(`berth open: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  const token = readToken(stateDir);
  if (token === null) {
    process.stderr.write(`berth open: cannot read the daemon token (${join(stateDir, "token")})\n`);
    return 1;
  }
  const url = `${base.replace(/\/?$/, "/")}#token=${token}`;
  if (browser) {
    let page: string;
    try {
      page = await writeRedirectPage(stateDir, url);
    } catch (e) {
      process.stderr.write(`berth open: cannot write ${join(stateDir, "open.html")} (${e instanceof Error ? e.message : String(e)}); run \`berth open --no-browser\` and open the URL it prints\n`);
      return 1;
    }
    const failed = noDisplay(process.env) ?? (await launch(page));
    if (failed === null) {
      process.stderr.write(
        `berth open: opened ${base} in your browser (through ${join(stateDir, "open.html")}, so the token is on no command line); ` +
          "if the browser cannot read that file (a snap-packaged browser cannot read hidden folders), run `berth open --no-browser` and open the URL it prints\n",
      );
      return 0;
    }
    process.stdout.write(url + "\n");
    const port = new URL(base).port;
    process.stderr.write(
      `berth open: ${failed}; open the URL above in a browser on this machine` +
        (failed.startsWith("no graphical display") ? ` (over SSH, forward its port first: ssh -L ${port}:127.0.0.1:${port} <this host>, then open the URL on your own machine)` : "") +
        "\n",
    );
    return 0;
  }
  process.stdout.write(url + "\n");
  return 0;
}
