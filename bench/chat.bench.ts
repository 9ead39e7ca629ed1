/**
 * `berth chat -p` figures, each beside a floor measured in the same run against the same loopback fake provider:
 * - chat.first_token_ms.median: `berth chat -p PROMPT --json` spawned → its first `turn.assistant_delta` line
 *   (process start, preflight, the SCV server started in the chat process since no daemon is up, session, turn,
 *   provider request). Median of SAMPLES runs.
 * - chat.first_token_mcp2_ms.median: the same with two MCP servers (the tools tests' fixture) configured, on a
 *   second run: the warm-up run filled the MCP tool-list cache (`$MC_HOME/state/mcp-tools`, keyed by server and
 *   cwd), as any run after a user's first in that directory finds it; the servers then start only once the
 *   provider answered (docs/runtime.md, "Tools per session"). The very first run waits for the servers' tool lists
 *   (it has nothing to offer the model until they answer) and is not measured.
 * - chat.first_token_daemon_ms.median: the same while a `berth daemon` is up (chat uses its SCV socket).
 * All four (floor included) are sampled round by round, each run waiting for the previous one to exit.
 * The floor is a minimal Node client spawned the same way: one streaming POST to the fake provider, printing the
 * first delta as a JSON line. Target (issue 12): ≤ 1.5× the floor on a warm machine.
 * - chat.tui_long_line_bytes_per_answer_byte: the interactive chat's screen (screen.ts, live.ts, markdown.ts, in
 *   this process, on a 100×40 terminal with the footer) streaming a 100 KB answer on one line, 20,000 one-word
 *   deltas: bytes written to the terminal per answer byte, beside the floor of 1 (the raw answer), and the CPU it
 *   took (median of LONG_LINE_RUNS). Before live.ts appended delta by delta: ~10,260 bytes per byte, ~12 s of CPU.
 */
import { spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { startFakeProvider } from "../test/fakes/fake-provider.js";
import { BERTH_BIN } from "../test/helpers/paths.js";
import { startDaemon } from "../test/scv/client.js";
import { LiveAnswer } from "../src/cli/chat/live.js";
import { MarkdownStream } from "../src/cli/chat/markdown.js";
import { Screen } from "../src/cli/chat/screen.js";
import { codeCached } from "./peers.bench.js";
import type { Figure } from "./run.js";

/** Rounds: on the shared 2-core machine a median of 9 moved by ±10% between runs of one build (docs/chat.md, Speed). */
const SAMPLES = 15;
const MCP_FIXTURE = fileURLToPath(new URL("../test/fixtures/mcp-server.js", import.meta.url));

const FLOOR = `
import { request } from "node:http";
const url = process.argv[1];
const body = JSON.stringify({ model: "fake-model", stream: true, messages: [{ role: "user", content: "hello" }] });
request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
  let buf = "";
  res.setEncoding("utf8");
  res.on("data", (c) => {
    buf += c;
    for (let j; (j = buf.indexOf("\\n\\n")) >= 0; buf = buf.slice(j + 2)) {
      const ev = buf.slice(0, j);
      if (!ev.startsWith("data: {")) continue;
      const t = JSON.parse(ev.slice(6)).choices?.[0]?.delta?.content;
      if (typeof t === "string" && t !== "") { process.stdout.write(JSON.stringify({ event: "delta", text: t }) + "\\n"); process.exit(0); }
    }
  });
}).end(body);
`;

/**
 * Spawn → first stdout line matching `re`, in ms. Resolves once the process exited, so the next sample does not
 * share the machine with this one's exit work (with MCP servers configured, their start-up and shutdown).
 */
function firstLine(cmd: string, args: string[], env: NodeJS.ProcessEnv, re: RegExp): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    let at: number | null = null;
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (at === null && re.test(out)) at = performance.now() - t0;
    });
    child.on("close", () => (at !== null ? resolve(at) : reject(new Error(`no first token from ${args.slice(0, 3).join(" ")}`))));
  });
}

/** Runs a command to its end (stdout ignored); rejects on a non-zero exit. */
function runToEnd(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: "ignore" });
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${args.slice(0, 3).join(" ")} exited ${String(code)}`))));
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)]! * 10) / 10;
}

const LONG_LINE_RUNS = 5;

/** One 100 KB single-line answer through the chat's screen: bytes written to the terminal, and CPU ms. */
function longLine(): { bytes: number; answerBytes: number; cpuMs: number } {
  let bytes = 0;
  const out = Object.assign(new EventEmitter(), {
    columns: 100,
    rows: 40,
    isTTY: true,
    write: (s: string): boolean => ((bytes += Buffer.byteLength(s)), true),
  }) as unknown as NodeJS.WriteStream;
  const screen = new Screen(out, true);
  screen.startFooter(() => "model · cwd · ctx –");
  const answer = new LiveAnswer(new MarkdownStream(true), {
    write: (t) => screen.write(t),
    transient: (t) => screen.transient(t),
    control: (t) => screen.control(t),
    size: () => screen.size(),
  });
  const start = bytes;
  const cpu = process.cpuUsage();
  for (let i = 0; i < 20_000; i++) answer.stream("word ");
  answer.end();
  const used = process.cpuUsage(cpu);
  screen.stop();
  return { bytes: bytes - start, answerBytes: 100_000, cpuMs: (used.user + used.system) / 1000 };
}

export function longLineFigure(): Figure {
  const runs = Array.from({ length: LONG_LINE_RUNS }, longLine);
  const perByte = Math.round((runs[0]!.bytes / runs[0]!.answerBytes) * 100) / 100;
  return {
    name: "chat.tui_long_line_bytes_per_answer_byte",
    value: perByte,
    unit: "bytes/byte",
    floor: 1,
    answer_bytes: runs[0]!.answerBytes,
    bytes: runs[0]!.bytes,
    cpu_ms: median(runs.map((r) => r.cpuMs)),
    target: "<= 3 (the raw rows, then the rendered line)",
    ok: perByte <= 3,
  };
}

export default async function bench(): Promise<Figure[]> {
  const tui = longLineFigure();
  const fake = await startFakeProvider();
  try {
    const mk = (mcp: boolean): string => {
      const home = mkdtempSync(join(tmpdir(), "bench-chat-"));
      const fakeDef = { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] };
      // Two distinct definitions (the cache is keyed by definition; the fixture ignores the extra argument).
      const server = (name: string) => ({ command: process.execPath, args: [MCP_FIXTURE, `--bench-${name}`], env: {} });
      writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: fakeDef }, provider: "fake", model: "fake-model", ...(mcp ? { mcp_servers: { one: server("one"), two: server("two") } } : {}) }));
      return home;
    };
    const env = (home: string): NodeJS.ProcessEnv => {
      const e: NodeJS.ProcessEnv = {};
      for (const [k, v] of Object.entries(process.env)) if (!/^(MC_|BERTH_|SCV_)/.test(k) && !k.includes("API_KEY")) e[k] = v;
      if (process.env["BENCH_CODE_CACHE"] === "0") e["BERTH_CODE_CACHE"] = "0"; // the ES module chunks, for a comparison
      return { ...e, MC_HOME: home, BERTH_CHAT_NO_DAEMON: "1" };
    };
    const plain = mk(false);
    const withMcp = mk(true);
    const chatArgs = [BERTH_BIN, "chat", "-p", "hello", "--json"];
    const delta = /"turn\.assistant_delta"/;
    const floor: number[] = [];
    const chat: number[] = [];
    const chatMcp: number[] = [];
    const viaDaemon: number[] = [];
    // With a daemon up, chat connects to its socket (the other runs say BERTH_CHAT_NO_DAEMON and serve themselves).
    const scvHome = mkdtempSync(join(tmpdir(), "bench-scv-"));
    const daemon = await startDaemon({ MC_HOME: plain, SCV_HOME: scvHome });
    try {
      const denv: NodeJS.ProcessEnv = { ...env(plain), SCV_HOME: scvHome };
      delete denv["BERTH_CHAT_NO_DAEMON"];
      const floorRun = (): Promise<number> => firstLine(process.execPath, ["--input-type=module", "-e", FLOOR, `${fake.baseUrl}/v1/chat/completions`], env(plain), /"delta"/);
      // One warm-up each; the MCP one runs to its end, so both servers' tool lists are cached.
      await floorRun();
      await firstLine(process.execPath, chatArgs, env(plain), delta);
      await runToEnd(process.execPath, chatArgs, env(withMcp));
      if (readdirSync(join(withMcp, "state", "mcp-tools")).filter((f) => f.endsWith(".json")).length !== 2) throw new Error("the warm-up run did not cache both MCP servers' tool lists");
      await firstLine(process.execPath, chatArgs, denv, delta);
      // Interleaved round by round, so machine load affects every figure and the floor alike.
      for (let i = 0; i < SAMPLES; i++) {
        floor.push(await floorRun());
        chat.push(await firstLine(process.execPath, chatArgs, env(plain), delta));
        chatMcp.push(await firstLine(process.execPath, chatArgs, env(withMcp), delta));
        viaDaemon.push(await firstLine(process.execPath, chatArgs, denv, delta));
      }
    } finally {
      await daemon.stop();
    }
    const f = median(floor);
    const fig = (name: string, xs: number[]): Figure => {
      const v = median(xs);
      return { name, value: v, unit: "ms", floor_ms: f, ratio: Math.round((v / f) * 100) / 100, target: "<= 1.5x floor", ok: v <= 1.5 * f, samples: xs.length, code_cache: codeCached(["chat", "stdio"]) };
    };
    return [fig("chat.first_token_ms.median", chat), fig("chat.first_token_mcp2_ms.median", chatMcp), fig("chat.first_token_daemon_ms.median", viaDaemon), tui];
  } finally {
    await fake.close();
  }
}
