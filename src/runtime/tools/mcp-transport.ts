/**
 * The stdio transport Berth starts MCP servers with: its own implementation of the SDK's public `Transport`
 * interface (no SDK internals), with a bound on one message line of the server's stdout. Contracts:
 * - The server is spawned as the SDK's `StdioClientTransport` spawns it: no shell, in `cwd`, with the SDK's safe
 *   default environment (`getDefaultEnvironment`) plus the configured `env`. Its stderr is piped into `stderr`, a
 *   stream that exists from construction on (listeners attached before `start` miss nothing). `start` resolves once
 *   the process spawned and rejects with the spawn error (`spawn <command> ENOENT`); a second `start` rejects.
 * - stdout is split into lines in linear time: the open line is kept as a list of chunks and joined once, at its
 *   newline; a trailing `\r` is dropped; each line is decoded as UTF-8 whole (a character split across reads is
 *   intact), parsed and validated as a JSON-RPC message, and delivered to `onmessage`. A line that fails to parse or
 *   validate goes to `onerror` and reading goes on.
 * - The bytes since the last `\n` are counted as they arrive. A line of exactly `maxLineBytes` bytes (newline
 *   excluded) is accepted; at byte `maxLineBytes + 1` without a newline, stdout is no longer read (destroyed: the
 *   buffered chunks are dropped, the server's next write fails) and `onLineOverflow` is called, once. Stopping the
 *   server is the caller's (close the client, as for any other close).
 * - `onclose` fires once: when `close()` is called (before the process is stopped, so the pending requests fail at
 *   once), or when the process closes by itself. Then `close()` stops the process as the SDK does: stdin ended, up
 *   to 2 s for it to exit, SIGTERM, up to 2 s more, SIGKILL; it resolves once the process exited or was sent
 *   SIGKILL, and returns the same promise every time. Nothing is delivered after `onclose`.
 * - `send` writes one line to stdin and resolves once written (or drained); it rejects when not connected. Errors
 *   of the process or its pipes (EPIPE from an exited server) go to `onerror`; none is ever left unhandled.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { PassThrough } from "node:stream";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { deserializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { drainedOrClosed } from "../../core/drain.js";

/** How to start one server (the settings' `command`, `args`, `env`, and the session's cwd). */
export interface StdioServer {
  command: string;
  args?: string[] | undefined;
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
}

/** Each step of the stop sequence waits this long for the process to exit. */
const STOP_STEP_MS = 2000;

export interface LineReaderEvents {
  message(message: JSONRPCMessage): void;
  error(error: Error): void;
  /** A line passed the bound: called once, nothing is read after it. */
  overflow(): void;
}

/** Splits a byte stream into JSON-RPC message lines of at most `maxLineBytes` bytes (newline excluded). */
export class JsonLineReader {
  /** The open line: the chunks since the last `\n`, and their length in bytes. */
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** Set once a line passed the bound or the reader was stopped: nothing more is read. */
  private stopped = false;

  constructor(
    private readonly maxLineBytes: number,
    private readonly on: LineReaderEvents,
  ) {}

  /** Reads one chunk; false once a line passed the bound (then and after, nothing is read). */
  push(chunk: Buffer): boolean {
    if (this.stopped) return false;
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const length = this.bytes + (nl - start);
      if (length > this.maxLineBytes) return this.overflow();
      const tail = chunk.subarray(start, nl);
      const line = this.chunks.length === 0 ? tail : Buffer.concat([...this.chunks, tail], length);
      this.chunks = [];
      this.bytes = 0;
      start = nl + 1;
      this.deliver(line);
      // The listener may have stopped the reader (a close on this message).
      if (this.stopped) return false;
    }
    const rest = chunk.length - start;
    if (this.bytes + rest > this.maxLineBytes) return this.overflow();
    if (rest > 0) {
      this.chunks.push(start === 0 ? chunk : chunk.subarray(start));
      this.bytes += rest;
    }
    return true;
  }

  /** Drops the open line and reads nothing more (without reporting an overflow). */
  stop(): void {
    this.stopped = true;
    this.chunks = [];
    this.bytes = 0;
  }

  private overflow(): false {
    this.stop();
    this.on.overflow();
    return false;
  }

  private deliver(line: Buffer): void {
    const end = line.length > 0 && line[line.length - 1] === 0x0d ? line.length - 1 : line.length;
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line.toString("utf8", 0, end));
    } catch (err) {
      this.on.error(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    this.on.message(message);
  }
}

/** Resolves true once `done` settles, or false after `ms` (the timer never holds the process open). */
function within(done: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    timer.unref();
    void done.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

export class BoundedStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: (<T extends JSONRPCMessage>(message: T) => void) | undefined;
  /** The server's stderr, from construction on. */
  readonly stderr = new PassThrough();
  private child: ChildProcessWithoutNullStreams | null = null;
  private exited = false;
  private closed = false;
  private closing: Promise<void> | null = null;
  private readonly reader: JsonLineReader;

  constructor(
    private readonly server: StdioServer,
    maxLineBytes: number,
    private readonly onLineOverflow: () => void,
  ) {
    this.reader = new JsonLineReader(maxLineBytes, {
      message: (m) => {
        if (!this.closed) this.onmessage?.(m);
      },
      error: (e) => this.onerror?.(e),
      overflow: () => {
        this.child?.stdout.destroy();
        this.onLineOverflow();
      },
    });
  }

  /** The server's process id while it runs; null before `start` and once it exited. */
  get pid(): number | null {
    return this.exited ? null : (this.child?.pid ?? null);
  }

  start(): Promise<void> {
    if (this.child !== null) {
      return Promise.reject(new Error("BoundedStdioTransport already started: Client.connect() calls start() itself"));
    }
    if (this.closed) return Promise.reject(new Error("BoundedStdioTransport was closed before it started"));
    const { command, args, env, cwd } = this.server;
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(command, args ?? [], { env: { ...getDefaultEnvironment(), ...env }, stdio: ["pipe", "pipe", "pipe"], shell: false, windowsHide: true, cwd });
    } catch (err) {
      // Arguments node refuses outright (a NUL byte in the command): a failed start, as a spawn error is.
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    this.child = child;
    const report = (error: Error): void => this.onerror?.(error);
    child.stdin.on("error", report);
    child.stdout.on("error", report);
    child.stderr.on("error", report);
    child.stdout.on("data", (chunk: Buffer) => {
      if (!this.closed) this.reader.push(chunk);
    });
    child.stderr.pipe(this.stderr);
    child.once("exit", () => {
      this.exited = true;
    });
    child.once("close", () => {
      this.exited = true;
      this.finish();
    });
    let spawned = false;
    return new Promise((resolve, reject) => {
      child.once("spawn", () => {
        spawned = true;
        resolve();
      });
      child.on("error", (error) => {
        // A failed spawn (no such command) has no process to stop; its "close" follows.
        if (!spawned) this.exited = true;
        reject(error);
        report(error);
      });
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (this.closed || stdin === undefined || !stdin.writable) throw new Error("Not connected");
    // Resolved on a close too: the message is lost with the connection, whose close fails the pending request.
    if (!stdin.write(JSON.stringify(message) + "\n")) await drainedOrClosed(stdin);
  }

  /** Fires `onclose` at once, then stops the process (see the header). Idempotent: the same promise each time. */
  close(): Promise<void> {
    if (this.closing === null) {
      const child = this.child;
      this.closing = child === null || this.exited ? Promise.resolve() : this.stop(child);
      this.finish();
    }
    return this.closing;
  }

  /** Nothing more is read or delivered; `onclose` fires, once. */
  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.reader.stop();
    this.onclose?.();
  }

  private async stop(child: ChildProcessWithoutNullStreams): Promise<void> {
    const exit = new Promise<void>((resolve) => {
      if (this.exited) resolve();
      else child.once("exit", () => resolve());
    });
    try {
      child.stdin.end();
    } catch {
      // Already gone.
    }
    if (await within(exit, STOP_STEP_MS)) return;
    child.kill("SIGTERM");
    if (await within(exit, STOP_STEP_MS)) return;
    child.kill("SIGKILL");
  }
}
