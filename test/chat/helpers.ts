/** Running `berth chat` as a real child process against the loopback fake provider. */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";

export function chatEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("MC_") && !k.startsWith("BERTH_") && !k.startsWith("SCV_") && !k.includes("API_KEY")) env[k] = v;
  return { ...env, MC_HOME: home, BERTH_OPENAI_AUTH_CALLBACK_PORT: "0", NO_COLOR: "1", ...extra };
}

/** A Berth home whose settings point the `fake` provider at the loopback fake (or an empty home). */
export function home(port?: number): string {
  const h = mkdtempSync(join(tmpdir(), "berth-chat-"));
  if (port !== undefined)
    writeFileSync(join(h, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  return h;
}

export const FAKE = { MC_PROVIDER: "fake", MC_MODEL: "fake-model" };

export class Proc {
  readonly child: ChildProcess;
  stdout = "";
  stderr = "";
  readonly exited: Promise<number | null>;
  private waiters: Array<() => void> = [];

  constructor(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd: string = mkdtempSync(join(tmpdir(), "berth-cwd-"))) {
    this.child = spawn(cmd, args, { env, cwd, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      this.stdout += d;
      this.wake();
    });
    this.child.stderr!.setEncoding("utf8").on("data", (d: string) => {
      this.stderr += d;
      this.wake();
    });
    this.child.stdin!.on("error", () => {});
    this.exited = new Promise((resolve) => this.child.on("close", (code) => {
      this.wake();
      resolve(code);
    }));
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Waits until stdout (from `from`) matches; fails with the transcript after `timeoutMs`. */
  async until(re: RegExp, from = 0, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    let closed = false;
    void this.exited.then(() => (closed = true));
    for (;;) {
      const m = this.stdout.slice(from).match(re);
      if (m) return m;
      if (closed || Date.now() > deadline) throw new Error(`no ${re} in output:\n${this.stdout}\nstderr:\n${this.stderr}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  write(s: string): void {
    this.child.stdin!.write(s);
  }
}

/** Runs `berth chat ARGS`; with `stdin` (or for -p, with none) the child's stdin is written and closed. */
export function chat(args: string[], env: NodeJS.ProcessEnv, o: { stdin?: string; cwd?: string } = {}): Proc {
  const p = new Proc(process.execPath, [BERTH_BIN, "chat", ...args], env, o.cwd);
  if (o.stdin !== undefined) p.child.stdin!.end(o.stdin);
  else if (args.includes("-p")) p.child.stdin!.end();
  return p;
}

/** The PID of the `berth chat` node process under `script` (a descendant of `root`). */
export function chatPid(root: number): number | null {
  const out = execFileSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" });
  const rows = out.split("\n").map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l)).filter((m) => m !== null);
  const kids = (p: number): number[] => rows.filter((m) => Number(m[2]) === p).map((m) => Number(m[1]));
  const stack = [root];
  while (stack.length > 0) {
    const p = stack.pop()!;
    const row = rows.find((m) => Number(m[1]) === p);
    if (row !== undefined && row[3]!.includes(" chat") && row[3]!.startsWith(process.execPath)) return p;
    stack.push(...kids(p));
  }
  return null;
}
