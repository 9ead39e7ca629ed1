/**
 * A spawned `berth service` (or `magi-code --app service`) with line-level access to its stdout.
 * Used by conformance scenarios, fuzz tests and benches: the real process, real stdio framing.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "./paths.js";

export interface ServiceProcessOptions {
  home?: string;
  cwd?: string;
  env?: Record<string, string>;
  args?: string[];
  bin?: string;
  /** Execute the launcher itself (its `#!` line), as a frontend does, instead of `node <bin>`. */
  exec?: boolean;
}

export class ServiceProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly home: string;
  /** The launch working directory (a fresh temp dir unless given). */
  cwd: string | undefined;
  readonly lines: string[] = [];
  stderr = "";
  private buf = "";
  private waiters: Array<() => void> = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(opts: ServiceProcessOptions = {}) {
    this.home = opts.home ?? mkdtempSync(join(tmpdir(), "berth-home-"));
    this.cwd = opts.cwd;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("MC_") && !k.startsWith("BERTH_")) env[k] = v;
    delete env.ANTHROPIC_API_KEY;
    delete env.OPENAI_API_KEY;
    Object.assign(env, { MC_HOME: this.home }, opts.env ?? {});
    const bin = opts.bin ?? BERTH_BIN;
    const args = opts.args ?? ["service"];
    this.child = spawn(opts.exec === true ? bin : process.execPath, opts.exec === true ? args : [bin, ...args], {
      cwd: opts.cwd ?? (this.cwd = mkdtempSync(join(tmpdir(), "berth-cwd-"))),
      env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf("\n")) >= 0) {
        this.lines.push(this.buf.slice(0, i));
        this.buf = this.buf.slice(i + 1);
      }
      this.wake();
    });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d: string) => (this.stderr += d));
    this.child.stdin.on("error", () => {});
    this.exited = new Promise((resolve) => this.child.on("close", (code, signal) => {
      this.wake();
      resolve({ code, signal });
    }));
  }

  /** Trailing stdout bytes that did not end with LF (must be empty for a well-behaved service). */
  get partial(): string {
    return this.buf;
  }

  send(record: unknown): void {
    this.child.stdin.write(typeof record === "string" ? record : JSON.stringify(record) + "\n");
  }

  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.child.stdin.write(data, (err) => (err ? reject(err) : resolve())));
  }

  end(): void {
    this.child.stdin.end();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Waits until at least `n` stdout lines exist (or the process exits); rejects after `timeoutMs`. */
  async waitLines(n: number, timeoutMs = 60_000): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    let closed = false;
    void this.exited.then(() => (closed = true));
    while (this.lines.length < n) {
      if (closed) break;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${n} lines (have ${this.lines.length}); stderr: ${this.stderr.slice(0, 500)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.lines.slice(0, n);
  }

  /**
   * Resolves with the first match of `re` in stderr (from offset `from`), as soon as it is written; rejects when the
   * process exits without it, or after `timeoutMs` (a safety net, not a condition).
   */
  waitStderr(re: RegExp, from = 0, timeoutMs = 60_000): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const m = re.exec(this.stderr.slice(from));
        if (m === null) return false;
        done();
        resolve(m);
        return true;
      };
      const onData = (): void => void check();
      const onExit = (): void => {
        if (check()) return;
        done();
        reject(new Error(`the service exited before stderr matched ${re}; stderr: ${this.stderr.slice(-500)}`));
      };
      const t = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for stderr to match ${re}; stderr: ${this.stderr.slice(-500)}`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(t);
        this.child.stderr.off("data", onData);
        this.child.off("close", onExit);
      };
      // Registered after the collector in the constructor, so `this.stderr` already holds the new chunk.
      this.child.stderr.on("data", onData);
      this.child.once("close", onExit);
      check();
    });
  }

  /** Sends one request and waits for the response correlated to it (events before it are kept in `lines`). */
  async request(method: string, payload: unknown, extra: Record<string, unknown> = {}, requestId = `r${++reqCounter}`): Promise<Record<string, any>> {
    const from = this.lines.length;
    this.send({ protocol_version: 1, kind: "request", request_id: requestId, method, payload, ...extra });
    for (let n = from + 1; ; n++) {
      await this.waitLines(n);
      if (this.lines.length < n) throw new Error(`service exited before answering ${method}; stderr: ${this.stderr.slice(0, 500)}`);
      const m = JSON.parse(this.lines[n - 1]!) as Record<string, any>;
      if (m.kind === "response" && m.request_id === requestId) return m;
    }
  }

  async initialize(): Promise<Record<string, any>> {
    return this.request("initialize", { supported_protocol_versions: [1] });
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    this.child.kill(signal);
  }
}

let reqCounter = 0;
