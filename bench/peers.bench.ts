/**
 * First turn of a fresh process (issue 19), each figure beside a minimal Node NDJSON host measured in the same run
 * against the same loopback fake provider (Chat Completions SSE, PEERS_DELTAS one-word deltas, default 1,000):
 * - peers.<door>.ready_ms: spawn → handshake answered (`initialize`);
 * - peers.<door>.session_ms: session create request → answer (app-service `session.create`, SCV `session.start`);
 * - peers.<door>.first_delta_ms: prompt written → first assistant delta read;
 * - peers.<door>.turn_ms: prompt written → terminal event read;
 * - peers.<door>.turn_cpu_ms: the server's main-thread CPU time from prompt written to terminal event read
 *   (/proc/<pid>/schedstat, nanoseconds; steadier than wall time on a loaded machine);
 * - peers.<door>.peak_rss_mb: the server's VmHWM at the end of the turn.
 * Doors: `service` (app-service over `bin/magi-code --app service`) and `stdio` (SCV over `berth stdio`).
 * Medians of PEERS_RUNS (default 5) runs, interleaved with the floor so machine load hits both alike; `ready_ms`, a
 * few tens of milliseconds that one busy moment can double, is the median of PEERS_READY_RUNS (default 15) more
 * spawns of each (handshake only), interleaved likewise. Each run uses a
 * fresh state root that one earlier spawn already initialised (handshake + session, no prompt), as the shared peers
 * harness does, so one-time setup is not counted. The floor host is vendored below (the reference host of the peers
 * harness, trimmed): one process, NDJSON on stdio, one POST per prompt, each SSE delta relayed as one line.
 * Berth is configured as the shared peers harness's Berth adapter configures it (its `settings.json` declares the fake
 * provider with `api_key_env`, the key is in the environment, `MC_PROVIDER` / `MC_MODEL` select it), so the launcher's
 * credential hand-off runs as it does for most users (it costs ~0.4 ms of `ready_ms`; until the twenty-sixth pass
 * this bench used `auth: "none"` and no key).
 * Targets: first delta ≤ 2× floor, turn ≤ 1.5×, session create ≤ 10 ms, ready ≤ 1.1×, peak RSS ≤ 1.3×.
 * A session is answered once its file is durable (the file's data and its directory entry fsynced, concurrently), so
 * the session figures carry `disk_sync_ms`: the median time of that same pair of fsyncs on a new 300-byte file in
 * the same file system, measured just before each run (this machine's disk has taken 0.3 to 8 ms for it).
 * Each figure says whether the doors ran the bundle (`bundled`: dist/cold/ newer than the last tsc build, as bin/berth
 * decides; `npm run bench:peers` builds it) or the unbundled dist/src/ (after a bare `tsc`), and whether they ran from
 * the V8 code cache (`code_cache`: bundled with a cache for this Node; BENCH_CODE_CACHE=0 runs the doors with
 * BERTH_CODE_CACHE=0, the ES module chunks, for a comparison).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { closeSync, existsSync, fdatasync, fsync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startFakeProvider } from "../test/fakes/fake-provider.js";
import { BERTH_BIN, MAGI_BIN, REPO_ROOT } from "../test/helpers/paths.js";
import { benchEnv } from "./env.js";
import type { Figure } from "./run.js";

const RUNS = Number(process.env["PEERS_RUNS"] ?? 5);
const DELTAS = Number(process.env["PEERS_DELTAS"] ?? 1000);
const READY_RUNS = Number(process.env["PEERS_READY_RUNS"] ?? 15);

const FLOOR_HOST = `
import { request } from "node:http";
const LLM = process.env.FLOOR_LLM_URL;
const write = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
let n = 0, buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => {
  buf += d;
  for (let k; (k = buf.indexOf("\\n")) !== -1; ) {
    const line = buf.slice(0, k); buf = buf.slice(k + 1);
    const { id, method, params } = JSON.parse(line);
    if (method === "initialize") write({ id, result: { ready: true } });
    else if (method === "session/create") write({ id, result: { sessionId: "s" + ++n } });
    else if (method === "turn/start") {
      const turnId = "t" + ++n;
      write({ id, result: { turnId } });
      request(LLM, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let text = "", sse = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          sse += c;
          for (let j; (j = sse.indexOf("\\n\\n")) !== -1; ) {
            const ev = sse.slice(0, j); sse = sse.slice(j + 2);
            if (!ev.startsWith("data: {")) continue;
            const t = JSON.parse(ev.slice(6)).choices?.[0]?.delta?.content;
            if (t) { text += t; write({ method: "turn/delta", params: { turnId, delta: t } }); }
          }
        });
        res.on("end", () => write({ method: "turn/completed", params: { turnId, status: "completed", text } }));
      }).end(JSON.stringify({ model: "fake-model", stream: true, messages: [{ role: "user", content: params.text }] }));
    }
  }
});
process.stdin.on("end", () => process.exit(0));
`;

interface Run {
  ready: number;
  session: number;
  firstDelta: number;
  turn: number;
  cpu: number;
  rss: number;
}

/** One protocol's requests and how its answers look (matched on raw lines: deltas are never parsed). */
interface Door {
  spawn: (home: string, env: NodeJS.ProcessEnv) => ChildProcessWithoutNullStreams;
  init: string;
  isInit: (line: string) => boolean;
  session: string;
  /** Returns the session ID once the line answers the session request. */
  sessionId: (line: string) => string | null;
  turn: (sessionId: string) => string;
  isDelta: (line: string) => boolean;
  isTerminal: (line: string) => boolean;
}

const appReq = (id: string, method: string, payload: unknown, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ protocol_version: 1, kind: "request", request_id: id, method, payload, ...extra }) + "\n";

const DOORS: Record<"floor" | "service" | "stdio", Door> = {
  floor: {
    spawn: (home, env) => spawn(process.execPath, ["--input-type=module", "-e", FLOOR_HOST], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] }),
    init: JSON.stringify({ id: 1, method: "initialize" }) + "\n",
    isInit: (l) => l.startsWith('{"id":1,'),
    session: JSON.stringify({ id: 2, method: "session/create" }) + "\n",
    sessionId: (l) => (l.startsWith('{"id":2,') ? ((JSON.parse(l) as { result: { sessionId: string } }).result.sessionId) : null),
    turn: (sid) => JSON.stringify({ id: 3, method: "turn/start", params: { sessionId: sid, text: `long answer ${DELTAS}` } }) + "\n",
    isDelta: (l) => l.startsWith('{"method":"turn/delta"'),
    isTerminal: (l) => l.startsWith('{"method":"turn/completed"'),
  },
  service: {
    spawn: (home, env) => spawn(MAGI_BIN, ["--app", "service"], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] }),
    init: appReq("i", "initialize", { supported_protocol_versions: [1] }),
    isInit: (l) => l.includes('"request_id":"i"'),
    session: appReq("s", "session.create", {}),
    sessionId: (l) => (l.includes('"request_id":"s"') ? ((JSON.parse(l) as { payload: { session_id: string } }).payload.session_id) : null),
    turn: (sid) => appReq("t", "turn.start", { prompt: `long answer ${DELTAS}` }, { session_id: sid }),
    isDelta: (l) => l.startsWith('{"protocol_version":1,"kind":"event"') && l.includes('"event":"turn.assistant_delta"'),
    isTerminal: (l) => l.startsWith('{"protocol_version":1,"kind":"event"') && l.includes('"event":"turn.terminal"'),
  },
  stdio: {
    spawn: (home, env) => spawn(BERTH_BIN, ["stdio"], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] }),
    init: JSON.stringify({ type: "initialize", request_id: "i", protocol_version: 3 }) + "\n",
    isInit: (l) => l.startsWith('{"type":"initialized"'),
    session: "", // filled per run (needs the cwd)
    sessionId: (l) => (l.startsWith('{"type":"session.started"') ? ((JSON.parse(l) as { session_id: string }).session_id) : null),
    turn: (sid) => JSON.stringify({ type: "turn.start", request_id: "t", session_id: sid, prompt: `long answer ${DELTAS}` }) + "\n",
    isDelta: (l) => l.startsWith('{"type":"assistant.delta"'),
    isTerminal: (l) => /^\{"type":"turn\.(completed|failed|cancelled)"/.test(l),
  },
};

/** CPU time (ms) the process's main thread has run so far; NaN where /proc has no schedstat. */
function cpuMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
  } catch {
    return NaN;
  }
}

function hwmMb(pid: number): number {
  const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Spawns the door, runs handshake, session and (unless `prime`) one turn, and times each step. */
async function runOnce(door: Door, home: string, env: NodeJS.ProcessEnv, prime: boolean): Promise<Run> {
  const sessionLine = door.session !== "" ? door.session : JSON.stringify({ type: "session.start", request_id: "s", cwd: home }) + "\n";
  const t0 = performance.now();
  const child = door.spawn(home, env);
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d.slice(0, 2000)));
  let buf = "";
  // Each step's waiter is registered before its request is written, and every waiter sees every line that arrives
  // after it: a short turn's terminal may come in the same stdout chunk as its first delta.
  const waiters: Array<{ pred: (l: string) => boolean; resolve: (at: number) => void }> = [];
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    const at = performance.now();
    buf += d;
    for (let k; (k = buf.indexOf("\n")) !== -1; ) {
      const line = buf.slice(0, k);
      buf = buf.slice(k + 1);
      for (let i = 0; i < waiters.length; i++) {
        const w = waiters[i]!;
        if (w.pred(line)) {
          waiters.splice(i--, 1);
          w.resolve(at);
        }
      }
    }
  });
  const exited = new Promise<void>((r) => child.on("close", () => r()));
  /** Resolves with the arrival time of the first line matching `pred` from now on. */
  const until = (pred: (l: string) => boolean): Promise<number> =>
    Promise.race([
      new Promise<number>((resolve) => waiters.push({ pred, resolve })),
      exited.then((): never => {
        throw new Error(`server exited early: ${stderr.slice(0, 400)}`);
      }),
    ]);
  try {
    const initialized = until(door.isInit);
    child.stdin.write(door.init);
    const ready = (await initialized) - t0;
    let sid: string | null = null;
    const t1 = performance.now();
    const created = until((l) => (sid = door.sessionId(l)) !== null);
    child.stdin.write(sessionLine);
    const session = (await created) - t1;
    if (prime) return { ready, session, firstDelta: NaN, turn: NaN, cpu: NaN, rss: NaN };
    const c2 = cpuMs(child.pid!);
    const t2 = performance.now();
    const first = until(door.isDelta);
    let term = "";
    const terminal = until((l) => door.isTerminal(l) && (term = l) !== "");
    child.stdin.write(door.turn(sid ?? ""));
    const firstDelta = (await first) - t2;
    const turn = (await terminal) - t2;
    const cpu = cpuMs(child.pid!) - c2;
    if (!/completed/.test(term.slice(0, 200)) && !term.includes('"status":"completed"')) throw new Error(`turn did not complete: ${term.slice(0, 300)}`);
    return { ready, session, firstDelta, turn, cpu, rss: hwmMb(child.pid!) };
  } finally {
    child.stdin.end();
    await exited;
  }
}

/** Spawn → handshake answered, for a process that then exits at EOF (rejects if it exits without answering). */
async function readyOnce(door: Door, home: string, env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  const child = door.spawn(home, env);
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d.slice(0, 2000)));
  const exited = new Promise<void>((r) => child.on("close", () => r()));
  let buf = "";
  const answered = new Promise<number>((resolve) => {
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      const at = performance.now();
      buf += d;
      for (const line of buf.split("\n").slice(0, -1)) if (door.isInit(line)) resolve(at);
    });
  });
  child.stdin.write(door.init);
  try {
    const early = exited.then((): never => {
      throw new Error(`server exited early: ${stderr.slice(0, 400)}`);
    });
    return (await Promise.race([answered, early])) - t0;
  } finally {
    child.stdin.end();
    await exited;
  }
}

/** One new file's creation made durable as a session's is: 300 bytes written, its data and its directory fsynced. */
async function durableCreateMs(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "bench-peers-sync-"));
  try {
    const t0 = performance.now();
    const fd = openSync(join(dir, "f"), "wx", 0o600);
    const dfd = openSync(dir, "r");
    try {
      writeSync(fd, "x".repeat(300));
      const sync = (f: (fd: number, cb: (e: Error | null) => void) => void, d: number): Promise<void> => new Promise((res, rej) => f(d, (e) => (e ? rej(e) : res())));
      await Promise.all([sync(fdatasync, fd), sync(fsync, dfd)]);
      return performance.now() - t0;
    } finally {
      closeSync(fd);
      closeSync(dfd);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const round = (v: number): number => Math.round(v * 10) / 10;

/** The choice bin/berth makes: the bundle when it is at least as new as the last tsc build. */
function bundled(): boolean {
  const mtime = (p: string): number => statSync(join(REPO_ROOT, p), { throwIfNoEntry: false })?.mtimeMs ?? NaN;
  return mtime("dist/cold/main.js") >= mtime("dist/.tsbuildinfo");
}

/** Whether `commands` run from the code cache (the launchers' `coldBoot`): bundled, a cache for each, not turned off. */
export function codeCached(commands = ["service", "stdio"]): boolean {
  const cache = (cmd: string): boolean => existsSync(join(REPO_ROOT, "dist", "cold", "cache", `${cmd}-${process.version}-${process.arch}.bin`));
  return bundled() && commands.every(cache) && process.env["BENCH_CODE_CACHE"] !== "0";
}

export default async function (): Promise<Figure[]> {
  const fake = await startFakeProvider();
  try {
    const base = benchEnv();
    if (process.env["BENCH_CODE_CACHE"] === "0") base["BERTH_CODE_CACHE"] = "0";
    const homeFor = (): string => {
      const home = mkdtempSync(join(tmpdir(), "bench-peers-"));
      // As the shared harness's Berth adapter configures it: a custom provider whose key comes from the environment
      // (so the launcher's credential hand-off runs, as for most users), selected by MC_PROVIDER / MC_MODEL.
      const def = { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, api_key_env: "FAKE_API_KEY", models: [{ id: "fake-model", context_window: 200000 }] };
      writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: def } }));
      return home;
    };
    const envFor = (home: string): NodeJS.ProcessEnv => ({ ...base, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model", FAKE_API_KEY: "fake-key", FLOOR_LLM_URL: `${fake.baseUrl}/v1/chat/completions` });
    const runs: Record<string, Run[]> = { floor: [], service: [], stdio: [] };
    const diskSync: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      for (const name of ["floor", "service", "stdio"] as const) {
        const home = homeFor();
        await runOnce(DOORS[name], home, envFor(home), true);
        if (name !== "floor") diskSync.push(await durableCreateMs());
        runs[name]!.push(await runOnce(DOORS[name], home, envFor(home), false));
      }
    }
    // The handshake series, each door in a state root one run above already initialised.
    const readyHomes: Record<string, string> = {};
    const ready: Record<string, number[]> = { floor: [], service: [], stdio: [] };
    for (const name of ["floor", "service", "stdio"] as const) {
      readyHomes[name] = homeFor();
      await runOnce(DOORS[name], readyHomes[name], envFor(readyHomes[name]), true);
    }
    for (let i = 0; i < READY_RUNS; i++)
      for (const name of ["floor", "service", "stdio"] as const) ready[name]!.push(await readyOnce(DOORS[name], readyHomes[name]!, envFor(readyHomes[name]!)));
    const floor = (k: keyof Run): number => (k === "ready" && READY_RUNS > 0 ? median(ready["floor"]!) : median(runs["floor"]!.map((r) => r[k])));
    const figures: Figure[] = [];
    for (const door of ["service", "stdio"] as const) {
      const m = (k: keyof Run): number => (k === "ready" && READY_RUNS > 0 ? median(ready[door]!) : median(runs[door]!.map((r) => r[k])));
      const fig = (name: string, k: keyof Run, unit: string, target: string, limit: number): Figure => {
        const v = m(k);
        const f = floor(k);
        return { name: `peers.${door}.${name}`, value: round(v), unit, floor: round(f), ratio: Math.round((v / f) * 100) / 100, target, ok: v <= limit, runs: k === "ready" && READY_RUNS > 0 ? READY_RUNS : RUNS, deltas: DELTAS, bundled: bundled(), code_cache: codeCached() };
      };
      figures.push(
        fig("ready_ms", "ready", "ms", "<= 1.1x floor", 1.1 * floor("ready")),
        { ...fig("session_ms", "session", "ms", "<= 10", 10), disk_sync_ms: round(median(diskSync)) },
        fig("first_delta_ms", "firstDelta", "ms", "<= 2x floor", 2 * floor("firstDelta")),
        fig("turn_ms", "turn", "ms", "<= 1.5x floor", 1.5 * floor("turn")),
        fig("turn_cpu_ms", "cpu", "ms", "<= 1.5x floor", 1.5 * floor("cpu")),
        fig("peak_rss_mb", "rss", "MB", "<= 1.3x floor", 1.3 * floor("rss")),
      );
    }
    return figures;
  } finally {
    await fake.close();
  }
}
