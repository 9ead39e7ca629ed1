/**
 * `berth daemon [--listen HOST:PORT] [--no-berth-runtime] [--session-content-quota BYTES] [--supervised]`: the live-backend host. Ready line on
 * stdout, logs on stderr. Berth's own runtime is registered as provider `berth` over the backend socket (in this
 * process) before the ready line is printed, unless `--no-berth-runtime` (`--berth-runtime` is accepted and is
 * the default). With no model provider configured the runtime still registers; its turns fail naming the cause.
 */
// First: the heap settings must hold before the other modules load (daemon-heap.ts).
import "./daemon-heap.js";
import { join } from "node:path";
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { readRegularFileSync } from "../store/regular-file.js";
import { startHost, type HostHandle } from "../protocols/host/host.js";
import { resolveHome } from "../store/home.js";
import { storageProblemOf } from "../store/sessions/errors.js";
import { isLoopbackHost } from "../protocols/host/ui-guard.js";
import { startDaemonChannels, type DaemonChannels } from "./daemon-channels.js";
import { ConfirmRegistry } from "./daemon-confirm.js";
import { createDaemonControl } from "./daemon-control.js";
import { delegatedPeer, peerPids } from "./daemon-peer.js";
import type { Socket } from "node:net";
import type { ScvServerDeps } from "../protocols/scv/connection.js";
import { startDaemonDelegations, type DaemonDelegations } from "./daemon-delegations.js";
import { RESTART_EXIT_CODE, restartPlanner } from "./daemon-restart.js";
import { listenScvSocket, scvSocketPath, type ScvSocketHandle } from "./scv-socket.js";
import { packageVersion } from "./process-io.js";
import { ENDPOINT_FILE, readEndpoint } from "./endpoint-file.js";

const SHUTDOWN_DEADLINE_MS = 5000;
const RUNTIME_READY_MS = 10_000;

import { containCrashes } from "./crash-containment.js";

/** Start the in-process Berth runtime backend; resolves with its close function. */
async function startRuntime(handle: HostHandle): Promise<() => Promise<void>> {
  const [{ BerthRuntimeBackend }, { Agent }, { SessionManager, SessionStore }, home, { SettingsStore }, approvals] = await Promise.all([
    import("../backends/berth/backend.js"),
    import("../runtime/agent.js"),
    import("../store/sessions/index.js"),
    import("../store/home.js"),
    import("../store/settings/settings-store.js"),
    import("../store/settings/approval-policy.js"),
  ]);
  const berthHome = home.resolveHome(process.env);
  const cwd = process.cwd();
  const settings = new SettingsStore({ home: berthHome, projectDir: cwd, env: process.env });
  const log = daemonLog;
  const noteOnce = approvals.onceLogger(log);
  // The agent's session-bound tools (`question`) are the backend's: bound once the backend exists.
  let backend: InstanceType<typeof BerthRuntimeBackend> | null = null;
  const rt = new BerthRuntimeBackend({
    socketPath: handle.backendSocket,
    manager: new SessionManager(new SessionStore({ home: berthHome })),
    runner: new Agent({ home: berthHome, cwd, env: process.env, settings, sessionTools: (s) => backend?.sessionTools(s) ?? [] }),
    cwd,
    registryPath: join(handle.stateDir, "berth-runtime.json"),
    log,
    // settings' approval_policy, as for SCV sessions (a project's files may only make it stricter).
    approvalPolicy: async (dir) => {
      const r = await approvals.sessionApprovalPolicy({ home: berthHome, env: process.env, launch: settings, launchDir: cwd }, dir);
      noteOnce(r.notes);
      return r.policy;
    },
  });
  backend = rt;
  rt.start();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), RUNTIME_READY_MS)));
  const first = await Promise.race([rt.ready, timeout]);
  clearTimeout(timer);
  if (first === "timeout") {
    await rt.close();
    throw new Error("the Berth runtime did not register in time");
  }
  return () => rt.close();
}

/** The chat channel components (set once the SCV socket listens). */
let channels: DaemonChannels | null = null;
let supervised = false;
/** Delegated-run records and the orphan reaper (started before the SCV socket listens). */
let delegations: DaemonDelegations | null = null;
const confirm = new ConfirmRegistry();

/** Set by `--supervised` or when running as a systemd unit (INVOCATION_ID is set by systemd for its units). */
function underSupervisor(): boolean {
  return supervised || (process.env["INVOCATION_ID"] ?? "") !== "";
}

/** Starts the daemon's shutdown with an exit code (set once the daemon runs). */
let requestStop: ((why: string, code: number) => void) | null = null;
const restart = restartPlanner({
  home: resolveHome(process.env),
  supervised: underSupervisor,
  unanswered: () => channels?.unanswered() ?? 0,
  originOf: async (session) => (await channels?.chatOf(session)) ?? null,
  exec: { node: process.execPath, script: process.argv[1] ?? "berth" },
  restart: (why) => requestStop?.(why, RESTART_EXIT_CODE),
});

const daemonControl = createDaemonControl({
  version: packageVersion(),
  pid: process.pid,
  channels: () => channels,
  confirm,
  delegations: {
    counts: () => delegations?.counts() ?? Promise.resolve({ active: 0, reaped: 0 }),
    list: (all) => delegations?.list(all) ?? Promise.resolve([]),
    kill: (handle, orphans) => delegations?.kill(handle, orphans) ?? Promise.resolve(handle !== undefined ? { unknown: handle } : { killed: [] }),
  },
  restart: restart,
  // As scv-deps.ts resolves a session's model: this process's environment, launch directory and home.
  selection: async () => {
    const [{ SettingsStore }, { resolveSelection }] = await Promise.all([import("../store/settings/settings-store.js"), import("../store/settings/effective.js")]);
    const sel = resolveSelection(await new SettingsStore({ home: resolveHome(process.env), projectDir: process.cwd(), env: process.env }).load());
    return { provider: sel.provider_id, model: sel.model_id };
  },
});

/**
 * Why the peer of `socket` may not manage the daemon: it belongs to a delegated run, or it is gone before its
 * request could be checked. Unknown peers (no `ss`, not Linux) are allowed: docs/scv.md names the limits.
 */
async function delegatedCaller(socket: Socket, home: string): Promise<string | null> {
  const peer = await peerPids(socket);
  if ("unknown" in peer) return null;
  if (peer.pids.length === 0) return "the requesting process is gone before its request could be checked";
  return delegatedPeer(peer.pids, home);
}

async function startScv(): Promise<[ScvSocketHandle, () => Promise<void>]> {
  const home = resolveHome(process.env);
  // A dynamic import, as berth stdio and berth chat make: the bundle then keeps scv-deps in its own chunk instead of
  // giving their paths a re-export stub to load.
  const { buildScvDeps } = await import("./scv-deps.js");
  const built = await buildScvDeps({
    home,
    env: process.env,
    transport: "socket",
    log: daemonLog,
    daemonControl,
  });
  try {
    const perConnection = (socket: Socket): Partial<ScvServerDeps> => ({
      daemonControl: (cmd, rid) => daemonControl(cmd, rid, () => delegatedCaller(socket, home)),
    });
    return [await listenScvSocket(scvSocketPath(process.env), built.deps, perConnection), () => built.close()];
  } catch (e) {
    await built.close();
    throw e;
  }
}

function parseListen(v: string): { host: string; port: number } | null {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(v);
  if (!m) return null;
  const port = Number(m[2]);
  if (port > 65535) return null;
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

export async function runDaemon(argv: string[]): Promise<number> {
  containCrashes(daemonLog);
  let listen = { host: "127.0.0.1", port: 0 };
  let listenGiven = false;
  let withRuntime = true;
  let quota: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--listen" || a.startsWith("--listen=")) {
      const v = a === "--listen" ? argv[++i] : a.slice("--listen=".length);
      const parsed = v ? parseListen(v) : null;
      if (!parsed) {
        const given = v ? `; got ${JSON.stringify(v.slice(0, 80))}` : "";
        process.stderr.write(`berth daemon: --listen needs HOST:PORT with a port from 0 to 65535 (0 picks a free one), such as 127.0.0.1:8080${given}\n`);
        return 2;
      }
      listen = parsed;
      listenGiven = true;
    } else if (a === "--berth-runtime") {
      withRuntime = true;
    } else if (a === "--no-berth-runtime") {
      withRuntime = false;
    } else if (a === "--session-content-quota" || a.startsWith("--session-content-quota=")) {
      const v = a === "--session-content-quota" ? argv[++i] : a.slice("--session-content-quota=".length);
      const n = v !== undefined && /^[1-9][0-9]{0,15}$/.test(v) ? Number(v) : NaN;
      if (!Number.isSafeInteger(n)) {
        process.stderr.write(`berth daemon: --session-content-quota needs a positive number of bytes\n`);
        return 2;
      }
      quota = n;
    } else if (a === "--supervised") {
      supervised = true;
    } else if (a === "-h" || a === "--help") {
      process.stdout.write(
        "usage: berth daemon [--listen HOST:PORT] [--no-berth-runtime] [--session-content-quota BYTES] [--supervised]\n" +
          "  Berth's own runtime serves sessions as provider `berth` unless --no-berth-runtime.\n" +
          "  --listen defaults to 127.0.0.1 (loopback only) on the port of the last start when it is free, else any free\n" +
          "  port. A non-loopback address exposes the AHP socket and the\n" +
          "  web UI to the network, guarded only by the bearer token over plain HTTP: see README (Web UI).\n" +
          "  --session-content-quota bounds the decoded size of a backend's resource-carried turn snapshot (none by default).\n",
      );
      return 0;
    } else {
      process.stderr.write(`berth daemon: unknown argument ${a}; berth daemon --help lists the options\n`);
      return 2;
    }
  }
  const { home, problem: stateRootProblem } = (await import("../store/state-root.js")).prepareHome(process.env);
  if (stateRootProblem !== null) {
    process.stderr.write(`berth daemon: ${stateRootProblem}\n`);
    return 1;
  }
  if (!isLoopbackHost(listen.host)) {
    process.stderr.write(
      `berth daemon: WARNING: listening on ${listen.host}, not loopback: anyone who can reach this port and learns the token controls your sessions (plain HTTP, no TLS)\n`,
    );
  }
  let handle: HostHandle;
  try {
    // The host's own lines (a lock wait, internal errors) under this command's name, like the rest of its stderr.
    // Without --listen, the port of the last start when it is free: a web UI page left open reconnects to a
    // restarted daemon by itself (it proves the token first: core/ui-proof.ts).
    const preferPort = listenGiven ? undefined : readLastPort(join(home, "host"));
    handle = await startHost({
      home,
      host: listen.host,
      port: listen.port,
      ...(preferPort !== undefined ? { preferPort } : {}),
      log: daemonLog,
      ...(quota !== undefined ? { sessionContentQuota: quota } : {}),
    });
  } catch (e) {
    process.stderr.write(`berth daemon: ${startFailure(e)}\n`);
    return 1;
  }
  delegations = startDaemonDelegations({ home, log: daemonLog });
  let scv: ScvSocketHandle;
  let scvClose: () => Promise<void>;
  try {
    [scv, scvClose] = await startScv();
  } catch (e) {
    // Its own message names the path (under SCV_HOME, which the storage sentences' MC_HOME fix would misname).
    process.stderr.write(`berth daemon: SCV socket: ${e instanceof Error ? e.message : String(e)}\n`);
    await handle.close();
    return 1;
  }
  let stopRuntime: () => Promise<void> = () => Promise.resolve();
  if (withRuntime) {
    try {
      stopRuntime = await startRuntime(handle);
    } catch (e) {
      process.stderr.write(`berth daemon: ${startFailure(e)}\n`);
      await scv.close();
      await scvClose();
      await handle.close();
      return 1;
    }
  }
  channels = await startDaemonChannels({
    home,
    workspace: process.cwd(),
    scvSocket: scv.path,
    log: daemonLog,
  });
  const sweep = setInterval(() => confirm.sweep(), 10_000);
  sweep.unref();
  const endpointFile = join(handle.stateDir, ENDPOINT_FILE);
  const exited = new Promise<number>((resolveExit) => {
    let stopping = false;
    const stop = (sig: string, code = 0) => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`berth daemon: ${sig}, shutting down\n`);
      restart.stop();
      const timer = setTimeout(() => {
        process.stderr.write("berth daemon: shutdown deadline passed, exiting\n");
        resolveExit(1);
        process.exit(1);
      }, SHUTDOWN_DEADLINE_MS);
      timer.unref();
      rmSync(endpointFile, { force: true });
      delegations?.stop();
      (channels?.stop() ?? Promise.resolve())
        .catch((e: unknown) => process.stderr.write(`berth daemon: channels shutdown error: ${String(e)}\n`))
        .then(() => scv.close())
        .then(() => scvClose())
        .catch((e: unknown) => process.stderr.write(`berth daemon: SCV shutdown error: ${String(e)}\n`))
        .then(() => stopRuntime())
        .catch((e: unknown) => process.stderr.write(`berth daemon: runtime shutdown error: ${String(e)}\n`))
        .then(() => handle.close())
        .then(
        () => resolveExit(code),
        (e: unknown) => {
          process.stderr.write(`berth daemon: shutdown error: ${String(e)}\n`);
          resolveExit(1);
        },
      );
    };
    requestStop = (why, code) => stop(why, code);
    // Installed before the ready line is printed: a supervisor may signal as soon as it reads that line, and until
    // a listener exists SIGTERM's default action kills the process without a shutdown. `on`, not `once`: a second
    // signal during shutdown must not fall back to that default either (`stop` is idempotent).
    // SIGHUP: the terminal a foreground daemon runs in was closed; its default action would kill it without one.
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
    process.on("SIGHUP", () => stop("SIGHUP"));
  });
  // Discovery record for `berth open` (owner-only; the token itself stays in host/token), written before the ready
  // line: whoever reads that line (`berth open` starting this daemon, a supervisor) may look the record up at once,
  // and found the previous daemon's (a killed one's record stays) until this write. Replaced by a rename, so a reader
  // never sees it empty or half written (no fsync: a record outliving a power loss names a dead process anyway).
  try {
    const tmp = `${endpointFile}.${process.pid}`;
    writeFileSync(tmp, JSON.stringify({ pid: process.pid, http: handle.httpUrl, ui: handle.uiUrl.replace(/#.*$/, "") }) + "\n", { mode: 0o600 });
    renameSync(tmp, endpointFile);
  } catch (e) {
    process.stderr.write(`berth daemon: cannot write ${endpointFile} (berth open will not find this daemon): ${e instanceof Error ? e.message : String(e)}\n`);
  }
  if (!listenGiven) writeLastPort(handle.stateDir, new URL(handle.httpUrl).port);
  // The host's ready line with the SCV socket added before the web UI's address (the contract's field order).
  const { ui, ...hostFields } = JSON.parse(handle.readyLine()) as Record<string, unknown>;
  process.stdout.write(JSON.stringify({ ...hostFields, scv_socket: scv.path, ui }) + "\n");
  // The token is shown only to a person at a terminal: a redirected stderr is a log file.
  if (process.stderr.isTTY) process.stderr.write(`berth daemon: web UI at ${handle.uiUrl}\n`);
  else process.stderr.write(`berth daemon: web UI at ${handle.uiUrl.replace(/#.*$/, "")} (its token is in the ready line's "ui" field, or run \`berth open\`)\n`);
  return await exited;
}

/** A start-up failure's line: its message, led by the cause and fix when the file system refused (read-only, full…). */
/** `host/last-port`: the loopback port the last start listened on, tried first at the next (kept across stops). */
const LAST_PORT_FILE = "last-port";

function readLastPort(stateDir: string): number | undefined {
  try {
    const text = readRegularFileSync(join(stateDir, LAST_PORT_FILE), 16).toString("utf8").trim();
    const n = /^[1-9][0-9]{0,4}$/.test(text) ? Number(text) : NaN;
    return n >= 1024 && n <= 65535 ? n : undefined;
  } catch {
    return undefined;
  }
}

function writeLastPort(stateDir: string, port: string): void {
  try {
    writeFileSync(join(stateDir, LAST_PORT_FILE), `${port}\n`, { mode: 0o600 });
  } catch {
    // Only a convenience: the next start picks a free port.
  }
}

/** One line on stderr under this command's name. */
function daemonLog(m: string): void {
  process.stderr.write(`berth daemon: ${m}\n`);
}

function startFailure(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const locked = e as { code?: unknown; stateDir?: unknown; home?: unknown };
  if (locked.code === "ELOCKED" && typeof locked.stateDir === "string" && typeof locked.home === "string") {
    const running = readEndpoint(locked.stateDir);
    const where = running === null ? "" : ` (pid ${running.pid}, ${running.http})`;
    const stop = running === null ? "stop it" : `stop it (kill ${running.pid})`;
    return `another berth daemon${where} is already running with ${locked.home} (its state directory ${locked.stateDir} is locked); use it (\`berth open\` opens its web UI; \`berth chat\` connects to it), ${stop}, or set MC_HOME to another directory`;
  }
  const problem = storageProblemOf(e);
  return problem === undefined ? message : `cannot start: ${problem} (${message})`;
}
