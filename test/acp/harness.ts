/**
 * Drives a spawned `berth acp` with the ACP SDK's own client over stdio (real process, real framing), while every
 * frame Berth writes is tapped and validated against the SDK's JSON schema (`schema.ts`). Berth talks to the
 * loopback fake provider through settings.json.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { after, before } from "node:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { fakeSettings } from "../turns/helpers.js";
import { validateAgentFrame } from "./schema.js";

export type Frame = Record<string, any>;

export interface ClientBehaviour {
  /** Answers `session/request_permission` (default: the first allow_once option). */
  permission?: (p: acp.RequestPermissionRequest) => acp.RequestPermissionResponse | Promise<acp.RequestPermissionResponse>;
  /** When set, the client serves fs requests from these editor buffers (path → text) and records writes there. */
  buffers?: Map<string, string>;
  /** When true, the client serves terminal requests by running the command itself (like an editor's terminal). */
  terminals?: boolean;
  /** fs/terminal methods the client receives but never answers (a hung editor), even when Berth withdraws them. */
  unanswered?: string[];
}

/** A client-side terminal: the command's process and its combined output. */
interface TestTerminal {
  output: string;
  exit: Promise<{ exitCode: number | null; signal: string | null }>;
  kill(): void;
  released: boolean;
}

export interface AgentProcessOptions {
  home?: string;
  cwd?: string;
  env?: Record<string, string>;
  client?: ClientBehaviour;
  /** Runs `berth acp` under `ulimit -f` of this many 512-byte blocks (a file system that refuses writes: EFBIG). */
  fileSizeLimit?: number;
}

/** One spawned `berth acp` and an SDK client connected to it. */
export class AcpAgentProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly home: string;
  readonly cwd: string;
  /** Every frame Berth wrote, in order. */
  readonly received: Frame[] = [];
  /** Every frame the client wrote, in order. */
  readonly sent: Frame[] = [];
  /** Schema violations found in `received`. */
  readonly invalid: string[] = [];
  readonly updates: acp.SessionNotification[] = [];
  /** Terminals the client created for Berth, by ID. */
  readonly terminals = new Map<string, TestTerminal>();
  stderr = "";
  readonly conn: acp.ClientConnection;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly methods = new Map<string, string>();
  private waiters: Array<() => void> = [];
  private holdAt: ((lineStart: string) => boolean) | null = null;
  /** Whether `holdOutputAt`'s line arrived and stdout is no longer read. */
  held = false;

  constructor(o: AgentProcessOptions = {}) {
    this.home = o.home ?? mkdtempSync(join(tmpdir(), "berth-acp-home-"));
    this.cwd = o.cwd ?? mkdtempSync(join(tmpdir(), "berth-acp-cwd-"));
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("MC_") && !k.startsWith("BERTH_")) env[k] = v;
    delete env["ANTHROPIC_API_KEY"];
    delete env["OPENAI_API_KEY"];
    Object.assign(env, { MC_HOME: this.home, BERTH_ACP_NO_BROWSER: "1" }, o.env ?? {});
    this.child =
      o.fileSizeLimit === undefined
        ? spawn(process.execPath, [BERTH_BIN, "acp"], { cwd: this.cwd, env, stdio: ["pipe", "pipe", "pipe"] })
        : spawn("/bin/sh", ["-c", `ulimit -f ${o.fileSizeLimit} && exec "$0" "$@"`, process.execPath, BERTH_BIN, "acp"], { cwd: this.cwd, env, stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d: string) => {
      this.stderr += d;
      this.wake();
    });
    this.child.stdin.on("error", () => undefined);
    this.exited = new Promise((resolve) => this.child.on("close", (code, signal) => resolve({ code, signal })));
    // stdout carries only ACP frames: every line must be one JSON-RPC object (checked on the raw bytes, since the
    // SDK's reader would skip what it cannot parse). The bytes reach the SDK client only through this listener, so
    // `holdOutputAt` can stop reading them (no web-stream adapter resumes the pipe behind the test's back).
    let pending = "";
    let toClient!: ReadableStreamDefaultController<Uint8Array>;
    let stdoutOpen = true;
    // The SDK client cancels its reader when its connection closes first (e.g. an answer it wrote after Berth exited).
    const stdout = new ReadableStream<Uint8Array>({ start: (c) => void (toClient = c), cancel: () => void (stdoutOpen = false) });
    const endStdout = (): void => {
      if (!stdoutOpen) return;
      stdoutOpen = false;
      toClient.close();
    };
    this.child.stdout.on("end", endStdout);
    this.child.stdout.on("close", endStdout);
    this.child.stdout.on("error", endStdout);
    this.child.stdout.on("data", (d: Buffer) => {
      if (stdoutOpen) toClient.enqueue(new Uint8Array(d));
      pending += d.toString("utf8");
      const hold = (start: string): void => {
        if (this.holdAt === null || !this.holdAt(start.slice(0, 1024))) return;
        this.holdAt = null;
        this.held = true;
        this.child.stdout.pause();
        this.wake();
      };
      for (let i = pending.indexOf("\n"); i !== -1; i = pending.indexOf("\n")) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        hold(line);
        let ok = false;
        try {
          const v = JSON.parse(line) as unknown;
          ok = typeof v === "object" && v !== null && !Array.isArray(v) && (v as Frame)["jsonrpc"] === "2.0";
        } catch {
          ok = false;
        }
        if (!ok) this.invalid.push(`stdout line is not a JSON-RPC frame: ${line.slice(0, 200)}`);
      }
      hold(pending);
    });
    const raw = acp.ndJsonStream(Writable.toWeb(this.child.stdin) as WritableStream<Uint8Array>, stdout);
    const stream: acp.Stream = {
      readable: raw.readable.pipeThrough(
        new TransformStream<acp.AnyMessage, acp.AnyMessage>({
          transform: (m, c) => {
            this.onReceived(m);
            c.enqueue(m);
          },
        }),
      ),
      writable: new WritableStream<acp.AnyMessage>({
        write: async (m) => {
          const f = m as Frame;
          this.sent.push(f);
          if (typeof f["method"] === "string" && f["id"] !== undefined) this.methods.set(JSON.stringify(f["id"]), f["method"]);
          const w = raw.writable.getWriter();
          try {
            await w.write(m);
          } finally {
            w.releaseLock();
          }
        },
        close: () => raw.writable.close(),
      }),
    };
    const behaviour = o.client ?? {};
    let app = acp
      .client({ name: "berth-acp-test" })
      .onNotification("session/update", ({ params }) => {
        this.updates.push(params);
        this.wake();
      })
      .onRequest("session/request_permission", ({ params }) => {
        if (behaviour.permission !== undefined) return behaviour.permission(params);
        const allow = params.options.find((x) => x.kind === "allow_once");
        return allow ? { outcome: { outcome: "selected", optionId: allow.optionId } } : { outcome: { outcome: "cancelled" } };
      });
    const buffers = behaviour.buffers;
    /** The handler's answer, or one that never comes for a method in `unanswered`. */
    const answer = <T>(method: string, reply: () => T): T | Promise<never> => (behaviour.unanswered?.includes(method) ? new Promise<never>(() => undefined) : reply());
    if (buffers !== undefined) {
      app = app
        .onRequest("fs/read_text_file", ({ params }) =>
          answer("fs/read_text_file", () => {
            const text = buffers.get(params.path);
            if (text === undefined) throw new acp.RequestError(-32002, "Resource not found");
            return { content: text };
          }),
        )
        .onRequest("fs/write_text_file", ({ params }) =>
          answer("fs/write_text_file", () => {
            buffers.set(params.path, params.content);
            return {};
          }),
        );
    }
    if (behaviour.terminals === true) {
      let n = 0;
      const term = (id: string): TestTerminal => {
        const t = this.terminals.get(id);
        if (t === undefined || t.released) throw new acp.RequestError(-32002, "Resource not found");
        return t;
      };
      app = app
        .onRequest("terminal/create", ({ params }) => answer("terminal/create", () => {
          const child = spawn(params.command, params.args ?? [], { cwd: params.cwd ?? this.cwd, stdio: ["ignore", "pipe", "pipe"] });
          const t: TestTerminal = {
            output: "",
            exit: new Promise((resolve) => child.on("close", (code, sig) => resolve({ exitCode: code, signal: sig }))),
            kill: () => void child.kill("SIGKILL"),
            released: false,
          };
          const add = (d: Buffer) => (t.output += d.toString("utf8"));
          child.stdout.on("data", add);
          child.stderr.on("data", add);
          const terminalId = `term-${++n}`;
          this.terminals.set(terminalId, t);
          return { terminalId };
        }))
        .onRequest("terminal/output", ({ params }) =>
          answer("terminal/output", async () => {
            const t = term(params.terminalId);
            const done = await Promise.race([t.exit, Promise.resolve(null)]);
            return { output: t.output, truncated: false, ...(done !== null ? { exitStatus: done } : {}) };
          }),
        )
        .onRequest("terminal/wait_for_exit", ({ params }) => answer("terminal/wait_for_exit", () => term(params.terminalId).exit))
        .onRequest("terminal/kill", ({ params }) =>
          answer("terminal/kill", () => {
            term(params.terminalId).kill();
            return {};
          }),
        )
        .onRequest("terminal/release", ({ params }) =>
          answer("terminal/release", () => {
            const t = term(params.terminalId);
            t.kill();
            t.released = true;
            return {};
          }),
        );
    }
    this.conn = app.connect(stream);
  }

  private onReceived(f: Frame): void {
    this.received.push(f);
    const problem = validateAgentFrame(f, (id) => this.methods.get(JSON.stringify(id)));
    if (problem !== null) this.invalid.push(`${problem} in ${JSON.stringify(f).slice(0, 400)}`);
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /**
   * Stops reading Berth's stdout as soon as the line being received starts (its first KiB) as `lineStart` says: the
   * rest of that line, and everything after it, stays unread, so once the pipe is full Berth's write of that frame
   * cannot finish (the frame must be larger than the pipe and this end's read buffer together: ~200 KiB will do).
   * Berth goes on reading stdin meanwhile. `releaseOutput` reads on.
   */
  holdOutputAt(lineStart: (start: string) => boolean): void {
    this.holdAt = lineStart;
  }

  releaseOutput(): void {
    this.holdAt = null;
    this.held = false;
    this.child.stdout.resume();
  }

  /** Writes these messages to Berth's stdin in one write, past the SDK client (their answers are still validated). */
  writeFrames(frames: Frame[]): void {
    for (const f of frames) {
      this.sent.push(f);
      if (typeof f["method"] === "string" && f["id"] !== undefined) this.methods.set(JSON.stringify(f["id"]), f["method"]);
    }
    this.child.stdin.write(frames.map((f) => JSON.stringify(f) + "\n").join(""));
  }

  get agent(): acp.ClientContext {
    return this.conn.agent;
  }

  /** Resolves once `pred` holds over the received frames (re-checked after every frame); rejects if Berth exits. */
  async until<T>(pred: () => T | undefined | false, what: string): Promise<T> {
    let exited = false;
    void this.exited.then(() => {
      exited = true;
      this.wake();
    });
    for (;;) {
      const v = pred();
      if (v !== undefined && v !== false) return v;
      if (exited) throw new Error(`berth acp exited while waiting for ${what}; stderr: ${this.stderr.slice(0, 600)}`);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  async initialize(caps: acp.ClientCapabilities = {}): Promise<acp.InitializeResponse> {
    return this.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: caps, clientInfo: { name: "berth-acp-test", version: "0" } });
  }

  /** Updates of one session, in arrival order. */
  updatesOf(sessionId: string): acp.SessionUpdate[] {
    return this.updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  }

  /** Ends stdin (the editor closing the agent) and waits for the exit. */
  async end(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.child.stdin.end();
    return this.exited;
  }
}

/** A fake provider plus settings.json in a fresh MC_HOME selecting it. */
export interface AcpRig {
  fake: FakeProvider;
  home: string;
  spawn(o?: Omit<AgentProcessOptions, "home">): AcpAgentProcess;
  close(): Promise<void>;
}

export async function startAcpRig(api: "openai-chat" | "openai-responses" | "anthropic" = "openai-responses"): Promise<AcpRig> {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "berth-acp-home-"));
  mkdirSync(home, { recursive: true });
  writeFileSync(join(home, "settings.json"), JSON.stringify(fakeSettings(fake.baseUrl, { api })));
  const procs: AcpAgentProcess[] = [];
  return {
    fake,
    home,
    spawn: (o = {}) => {
      const p = new AcpAgentProcess({ ...o, home });
      procs.push(p);
      return p;
    },
    close: async () => {
      for (const p of procs) {
        if (p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill("SIGKILL");
          await p.exited;
        }
      }
      await fake.close();
    },
  };
}

/** Starts a rig (`startAcpRig(api)`) before the enclosing suite's tests, handing it to `take`, and closes it after them. */
export function withAcpRig(take: (rig: AcpRig) => void, api?: "openai-chat" | "openai-responses" | "anthropic"): void {
  let rig: AcpRig | undefined;
  before(async () => {
    rig = await startAcpRig(api);
    take(rig);
  });
  after(async () => {
    await rig?.close();
  });
}

/**
 * A rig whose home holds one stored session with one completed turn (prompt "prompt-one"), made by a process that has
 * ended: for tests that open it again (load, resume, close) in new processes.
 */
export async function rigWithStoredSession(): Promise<{ rig: AcpRig; sessionId: string }> {
  const rig = await startAcpRig();
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = (await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] })) as { sessionId: string };
  const turn = (await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "prompt-one" }] })) as { stopReason: string };
  if (turn.stopReason !== "end_turn") throw new Error(`the stored session's turn ended ${turn.stopReason}`);
  await p.end();
  return { rig, sessionId };
}

/** Hand-made JSON-RPC frames (ids `r1`, `r2`, … per kit) and the answer an agent process wrote to one. */
export function frameKit(): {
  request: (method: string, params: unknown) => Frame;
  notification: (method: string, params: unknown) => Frame;
  answerOf: (p: AcpAgentProcess, f: Frame) => Frame | undefined;
  answer: (p: AcpAgentProcess, f: Frame) => Promise<Frame>;
} {
  let n = 0;
  const answerOf = (p: AcpAgentProcess, f: Frame): Frame | undefined => p.received.find((r) => r["id"] === f["id"] && r["method"] === undefined);
  return {
    request: (method, params) => ({ jsonrpc: "2.0", id: `r${++n}`, method, params }),
    notification: (method, params) => ({ jsonrpc: "2.0", method, params }),
    answerOf,
    answer: (p, f) => p.until(() => answerOf(p, f), `the answer to ${f["method"]}`),
  };
}
