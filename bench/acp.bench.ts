/**
 * `berth acp` figures: spawn -> `initialize` answered (median of cold spawns), and one prompt turn against the
 * loopback fake provider (session/new + session/prompt until its stop reason), each beside a Node floor measured in
 * the same run (a bare `node` that answers the first stdin line).
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startFakeProvider } from "../test/fakes/fake-provider.js";
import { BERTH_BIN } from "../test/helpers/paths.js";
import { fakeSettings } from "../test/turns/helpers.js";
import type { Figure } from "./run.js";

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

type Proc = ChildProcessByStdio<Writable, Readable, null>;

const frame = (id: number, method: string, params: unknown) => JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";

/** Resolves with the parsed response to `id`. */
function response(child: Proc, id: number): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    let buf = "";
    const on = (d: Buffer) => {
      buf += d.toString("utf8");
      for (let i = buf.indexOf("\n"); i !== -1; i = buf.indexOf("\n")) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const m = JSON.parse(line) as Record<string, unknown>;
        if (m["id"] === id && !("method" in m)) {
          child.stdout.off("data", on);
          resolve(m);
          return;
        }
      }
    };
    child.stdout.on("data", on);
  });
}

async function close(child: Proc): Promise<void> {
  child.stdin.end();
  await new Promise((r) => child.on("close", r));
}

async function floor(): Promise<number> {
  const t0 = performance.now();
  const child = spawn(process.execPath, ["-e", "process.stdin.once('data', (d) => process.stdout.write(d))"], { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin.write("x\n");
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  const dt = performance.now() - t0;
  await close(child);
  return dt;
}

function spawnAcp(home: string): Proc {
  return spawn(process.execPath, [BERTH_BIN, "acp"], { env: { ...process.env, MC_HOME: home }, stdio: ["pipe", "pipe", "inherit"] });
}

async function spawnToInit(home: string): Promise<number> {
  const t0 = performance.now();
  const child = spawnAcp(home);
  const answered = response(child, 0);
  child.stdin.write(frame(0, "initialize", { protocolVersion: 1, clientCapabilities: {} }));
  await answered;
  const dt = performance.now() - t0;
  await close(child);
  return dt;
}

async function oneTurn(home: string, cwd: string): Promise<number> {
  const child = spawnAcp(home);
  const init = response(child, 0);
  child.stdin.write(frame(0, "initialize", { protocolVersion: 1, clientCapabilities: {} }));
  await init;
  const t0 = performance.now();
  const created = response(child, 1);
  child.stdin.write(frame(1, "session/new", { cwd, mcpServers: [] }));
  const result = (await created)["result"];
  const sessionId = typeof result === "object" && result !== null && "sessionId" in result && typeof result.sessionId === "string" ? result.sessionId : "";
  if (sessionId === "") throw new Error("bench: session/new answered without a sessionId");
  const done = response(child, 2);
  child.stdin.write(frame(2, "session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] }));
  await done;
  const dt = performance.now() - t0;
  await close(child);
  return dt;
}

export default async function (): Promise<Figure[]> {
  const home = mkdtempSync(join(tmpdir(), "berth-bench-acp-"));
  const cwd = mkdtempSync(join(tmpdir(), "berth-bench-acp-cwd-"));
  const fake = await startFakeProvider();
  try {
    writeFileSync(join(home, "settings.json"), JSON.stringify(fakeSettings(fake.baseUrl)));
    await spawnToInit(home); // warm the file cache
    await floor();
    const init: number[] = [];
    const floors: number[] = [];
    const turns: number[] = [];
    for (let i = 0; i < 9; i++) {
      init.push(await spawnToInit(home));
      floors.push(await floor());
    }
    for (let i = 0; i < 5; i++) turns.push(await oneTurn(home, cwd));
    return [
      { name: "acp.spawn_to_initialize_ms.median", value: round(median(init)), unit: "ms", floor: round(median(floors)), floor_what: "node spawn + one stdin echo" },
      { name: "acp.new_session_and_prompt_turn_ms.median", value: round(median(turns)), unit: "ms", what: "session/new + session/prompt (fake provider echo) to its stopReason" },
    ];
  } finally {
    await fake.close();
  }
}
