/**
 * A spec-derived SCV v3 test client (docs/scv.md): NDJSON over a spawned `berth stdio` or a socket of a spawned
 * `berth daemon`. It records every server frame, checks the per-session `seq` rule (strictly +1, no gap, no
 * duplicate) and lets tests await frames by predicate. Both transports are opened through `Transport`, so a test
 * body runs unchanged over each.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { startFakeProvider, type FakeProvider, type FakeProviderOptions } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { fakeSettings } from "../turns/helpers.js";

export type Msg = Record<string, any>;
export type TransportName = "stdio" | "socket";
export const TRANSPORTS: TransportName[] = ["stdio", "socket"];

export class ScvClient {
  readonly frames: Msg[] = [];
  /** Raw lines that were not JSON objects (must stay empty). */
  readonly garbage: string[] = [];
  readonly closed: Promise<void>;
  private buf = "";
  private waiters = new Set<() => void>();
  private lastSeq = new Map<string, number>();
  readonly seqErrors: string[] = [];
  private rid = 0;
  ended = false;

  constructor(
    readonly input: Readable,
    private readonly output: Writable,
    readonly stderr: () => string = () => "",
  ) {
    input.setEncoding("utf8");
    input.on("data", (d: string) => this.onData(d));
    output.on("error", () => undefined);
    this.closed = new Promise((resolve) => input.once("close", () => resolve()));
    void this.closed.then(() => {
      this.ended = true;
      this.wake();
    });
  }

  private onData(d: string): void {
    this.buf += d;
    let i: number;
    while ((i = this.buf.indexOf("\n")) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      let m: unknown;
      try {
        m = JSON.parse(line);
      } catch {
        this.garbage.push(line);
        continue;
      }
      if (typeof m !== "object" || m === null) {
        this.garbage.push(line);
        continue;
      }
      const f = m as Msg;
      if (typeof f.seq === "number" && typeof f.session_id === "string") {
        const prev = this.lastSeq.get(f.session_id);
        if (prev !== undefined && f.seq !== prev + 1) this.seqErrors.push(`${f.type}: seq ${f.seq} after ${prev}`);
        this.lastSeq.set(f.session_id, f.seq);
      }
      this.frames.push(f);
    }
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  nextId(): string {
    return `r${++this.rid}`;
  }

  send(msg: Msg | string): void {
    this.output.write(typeof msg === "string" ? msg : JSON.stringify(msg) + "\n");
  }

  /** Sends a request with a fresh request_id (unless given) and returns that ID. */
  request(msg: Msg): string {
    const request_id = (msg.request_id as string | undefined) ?? this.nextId();
    this.send({ ...msg, request_id });
    return request_id;
  }

  /** The first frame at index ≥ `from` matching `pred`. Rejects when the connection closes first or after 60 s. */
  async waitFor(pred: (m: Msg) => boolean, from = 0, what = "frame"): Promise<Msg> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      for (let i = from; i < this.frames.length; i++) if (pred(this.frames[i]!)) return this.frames[i]!;
      if (this.ended) throw new Error(`connection closed before ${what}; frames: ${JSON.stringify(this.frames.slice(-5)).slice(0, 1500)}; stderr: ${this.stderr().slice(-800)}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last frames: ${JSON.stringify(this.frames.slice(-5)).slice(0, 1500)}`);
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(t);
          this.waiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, 1000);
        this.waiters.add(done);
      });
    }
  }

  /** The reply to `requestId` of one of `types` (or an `error`). */
  reply(requestId: string, types: string[], from = 0): Promise<Msg> {
    return this.waitFor((m) => m.request_id === requestId && (types.includes(m.type as string) || m.type === "error"), from, `reply to ${requestId}`);
  }

  async initialize(): Promise<Msg> {
    const id = this.request({ type: "initialize", protocol_version: 3, client: { name: "berth-test", version: "0" } });
    return this.reply(id, ["initialized"]);
  }

  /** Initializes and starts a session; returns session.started. */
  async open(extra: Msg = {}, cwd = mkdtempSync(join(tmpdir(), "scv-cwd-"))): Promise<Msg> {
    await this.initialize();
    const id = this.request({ type: "session.start", cwd, ...extra });
    const m = await this.reply(id, ["session.started"]);
    if (m.type !== "session.started") throw new Error(`session.start refused: ${JSON.stringify(m)}`);
    return m;
  }

  /** Starts a turn and resolves with its terminal event (and every frame of that request). */
  async turn(sessionId: string, prompt: string, extra: Msg = {}): Promise<{ requestId: string; terminal: Msg; frames: Msg[] }> {
    const from = this.frames.length;
    const requestId = this.request({ type: "turn.start", session_id: sessionId, prompt, ...extra });
    const terminal = await this.waitFor(
      (m) => m.request_id === requestId && ["turn.completed", "turn.cancelled", "turn.failed", "error"].includes(m.type as string),
      from,
      `terminal of ${requestId}`,
    );
    return { requestId, terminal, frames: this.frames.slice(from).filter((m) => m.request_id === requestId) };
  }

  end(): void {
    this.output.end();
  }
}

/** A fake provider plus an MC_HOME whose settings select it. */
export interface Rig {
  fake: FakeProvider;
  home: string;
  env: Record<string, string>;
}

export async function startRig(opts: { fake?: FakeProviderOptions; settings?: Record<string, unknown>; images?: boolean } = {}): Promise<Rig> {
  const fake = await startFakeProvider(opts.fake);
  const home = mkdtempSync(join(tmpdir(), "scv-home-"));
  mkdirSync(home, { recursive: true });
  const s = fakeSettings(fake.baseUrl) as Record<string, any>;
  if (opts.images === true) s.providers.fake.models[0].images = true;
  writeFileSync(join(home, "settings.json"), JSON.stringify({ ...s, ...opts.settings }));
  return { fake, home, env: { MC_HOME: home } };
}

export function childEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(MC_|BERTH_|SCV_)/.test(k)) env[k] = v;
  delete env.ANTHROPIC_API_KEY;
  delete env.OPENAI_API_KEY;
  return { ...env, ...extra };
}

export interface Transport {
  name: TransportName;
  open(): Promise<ScvClient>;
  close(): Promise<void>;
  /** stdio: the last spawned process; socket: the daemon. */
  children: ChildProcessWithoutNullStreams[];
}

/** `berth stdio` as a child; `cwd` is its launch directory (whose `.berth/settings.json` is the project layer). */
export function spawnStdio(env: Record<string, string>, cwd?: string): { client: ScvClient; child: ChildProcessWithoutNullStreams; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [BERTH_BIN, "stdio"], { env: childEnv(env), stdio: ["pipe", "pipe", "pipe"], ...(cwd !== undefined ? { cwd } : {}) });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return { client: new ScvClient(child.stdout, child.stdin, () => stderr), child, exited };
}

export interface Daemon {
  child: ChildProcessWithoutNullStreams;
  ready: Msg;
  socket: string;
  stderr(): string;
  connect(): Promise<ScvClient>;
  stop(): Promise<number | null>;
  exited: Promise<number | null>;
}

/** Sends a `daemon.control` command and resolves with its answer (a `daemon.status` notification may come between). */
export async function daemonControl(c: ScvClient, command: Msg): Promise<Msg> {
  const id = c.request({ type: "daemon.control", command });
  return c.reply(id, ["daemon.status"]);
}

export async function startDaemon(env: Record<string, string>): Promise<Daemon> {
  const scvHome = env.SCV_HOME ?? mkdtempSync(join(tmpdir(), "scv-"));
  const child = spawn(process.execPath, [BERTH_BIN, "daemon"], { env: childEnv({ SCV_HOME: scvHome, ...env }), stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      out += d;
      const i = out.indexOf("\n");
      if (i >= 0) resolve(out.slice(0, i));
    });
    void exited.then((code) => reject(new Error(`daemon exited ${code}: ${stderr}`)));
  });
  const ready = JSON.parse(line) as Msg;
  const socket = ready.scv_socket as string;
  return {
    child,
    ready,
    socket,
    stderr: () => stderr,
    exited,
    connect: () =>
      new Promise<ScvClient>((resolve, reject) => {
        const s: Socket = connect(socket);
        s.once("connect", () => resolve(new ScvClient(s, s, () => stderr)));
        s.once("error", reject);
      }),
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}

/** Opens clients over one transport: a fresh `berth stdio` each time, or connections to one daemon. */
export async function openTransport(name: TransportName, rig: Rig, env: Record<string, string> = {}): Promise<Transport> {
  const fullEnv = { ...rig.env, ...env };
  if (name === "stdio") {
    const children: ChildProcessWithoutNullStreams[] = [];
    const exits: Promise<number | null>[] = [];
    return {
      name,
      children,
      open: () => {
        const s = spawnStdio(fullEnv);
        children.push(s.child);
        exits.push(s.exited);
        return Promise.resolve(s.client);
      },
      close: async () => {
        for (const c of children) if (c.exitCode === null) c.stdin.end();
        await Promise.all(exits);
      },
    };
  }
  const d = await startDaemon(fullEnv);
  return { name, children: [d.child], open: () => d.connect(), close: async () => void (await d.stop()) };
}
