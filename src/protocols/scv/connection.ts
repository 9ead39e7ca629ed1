/**
 * One SCV client connection (stdio or one socket client): framing, the initialize handshake, dispatch to the
 * connection's single session, and bounded cleanup.
 *
 * Contract:
 * - Input is pulled one line at a time and each message is handled before the next is read, so replies keep request
 *   order and a client that outruns a full writer is slowed down (TCP/pipe backpressure), never dropped.
 * - One session per connection (as the reference server): a second `session.start` is `invalid_request`; a message
 *   naming another session ID is `session_not_found`.
 * - EOF: the active turn is cancelled, queued prompts are dropped, the session task is joined and the writer drained;
 *   `serveScvConnection` then resolves.
 * - A broken output or a send blocked for `sendTimeoutMs` enters bounded cleanup: input stops, the session's work is
 *   cancelled and given `graceMs` to finish, then the writer and the output are destroyed and the work joined.
 * - `stop()` (daemon shutdown) is the same bounded cleanup, started from outside.
 */
import type { Readable, Writable } from "node:stream";
import { decodeRecord, LineSplitter } from "../../transport/jsonl.js";
import {
  decodeMessage,
  errorFrame,
  MAX_CLIENT_FRAME_BYTES,
  MESSAGES,
  PROTOCOL_VERSION,
  WRITER_MAX_BYTES,
  WRITER_MAX_FRAMES,
  type ClientMessage,
  type ControlCommand,
  type WireError,
} from "./wire.js";
import { FrameWriter } from "./writer.js";

export const SEND_TIMEOUT_MS = 3000;
export const CLEANUP_GRACE_MS = 3000;

/** What a session module gets to talk to its client. */
export interface ConnectionOutput {
  /** Emits a frame built at admission (see FrameWriter.emit). */
  emit(build: () => string | null, signal?: AbortSignal): boolean | Promise<boolean>;
  /**
   * Whether a frame would be admitted synchronously now; when true, the caller may build its frame and `push` it in
   * the same synchronous step (the hot path of `assistant.delta`, without a builder closure per frame).
   */
  canPush(): boolean;
  /** Admits a frame built right after `canPush()` returned true. */
  push(frame: string): void;
  /** `push` of `head + body + ',"seq":' + seq + "}"` without building it (FrameWriter.pushSeqFrame). */
  pushSeqFrame(head: string, body: string, seq: number): void;
  /**
   * Hands the queued frames to the stream now rather than at the scheduled flush (FrameWriter.flush): for a frame
   * whose latency matters (a turn's first `assistant.delta`), since the rest of that step may be long.
   */
  flushNow(): void;
  error(e: WireError): boolean | Promise<boolean>;
}

type SessionMessage = Exclude<ClientMessage, { type: "initialize" | "daemon.control" | "session.start" }>;

/** The connection's session (implemented in session.ts over the SessionRuntime). */
export interface ScvSessionHandle {
  readonly id: string;
  handle(msg: SessionMessage): Promise<void> | void;
  /** Cancels the active turn and pending approvals, drops queued prompts, and resolves once its work has ended. */
  close(): Promise<void>;
}

export interface ScvServerDeps {
  server: { name: string; version: string };
  openSession(msg: Extract<ClientMessage, { type: "session.start" }>, out: ConnectionOutput): Promise<ScvSessionHandle | WireError>;
  /** `daemon.control` on this transport; absent → `unsupported` (stdio). */
  daemonControl?: (command: ControlCommand, requestId: string) => Promise<string | WireError> | string | WireError;
  sendTimeoutMs?: number;
  graceMs?: number;
  log?: (line: string) => void;
}

export interface ScvConnection {
  /** Resolves when the connection has ended and all its work was joined. */
  readonly done: Promise<void>;
  /** Bounded cleanup from outside (daemon shutdown). */
  stop(): Promise<void>;
  /**
   * Why the output failed, when a system error other than the client going away (EPIPE / ECONNRESET: like EOF)
   * failed it: its errno code (`ENOSPC`, `EIO`, …); null otherwise. `berth stdio` exits 1 then.
   */
  readonly outputFailure: string | null;
}

export function serveScvConnection(input: Readable, output: Writable, deps: ScvServerDeps): ScvConnection {
  const graceMs = deps.graceMs ?? CLEANUP_GRACE_MS;
  let session: ScvSessionHandle | null = null;
  let initialized = false;
  let ending: Promise<void> | null = null;
  let reading = true;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let outputFailure: string | null = null;

  const writer = new FrameWriter(output, {
    maxFrames: WRITER_MAX_FRAMES,
    maxBytes: WRITER_MAX_BYTES,
    stallMs: deps.sendTimeoutMs ?? SEND_TIMEOUT_MS,
    onStall: () => {
      deps.log?.("scv: a send stayed blocked; closing the connection");
      void cleanup();
    },
    onBroken: (err) => {
      const code = (err as NodeJS.ErrnoException | null)?.code;
      // A system error other than the client going away (EPIPE / ECONNRESET: its EOF), such as a full disk under a
      // redirected stdout, is said once; a closed or destroyed stream (the connection's own ending) is not.
      if (outputFailure === null && typeof code === "string" && /^E(?!RR_)[A-Z0-9]{1,31}$/.test(code) && code !== "EPIPE" && code !== "ECONNRESET") {
        outputFailure = code;
        deps.log?.(`the output stream failed (${code}); closing the connection`);
      }
      void cleanup();
    },
  });
  const out: ConnectionOutput = {
    emit: (build, signal) => writer.emit(build, signal),
    canPush: () => writer.canAdmit(),
    push: (frame) => writer.push(frame),
    pushSeqFrame: (head, body, seq) => writer.pushSeqFrame(head, body, seq),
    flushNow: () => writer.flush(),
    error: (e) => writer.emit(() => errorFrame(e)),
  };

  /**
   * Bounded cleanup: stop reading, cancel the session's work and give it `graceMs` to end and the writer to drain;
   * then destroy the writer and the output and join the work. Finally the input is released.
   */
  const cleanup = (): Promise<void> => {
    ending ??= (async () => {
      reading = false;
      const closing = (session?.close() ?? Promise.resolve()).catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), graceMs)));
      const first = await Promise.race([closing.then(() => writer.close()).then(() => "done" as const), graceOver]);
      clearTimeout(timer);
      if (first === "timeout") {
        writer.destroy();
        output.destroy();
        await closing;
      }
      if (output === (input as unknown) && !output.destroyed) {
        // A socket: finish our side and discard what the client still sends (closing with unread input would
        // reset the connection and could lose our last frames); destroy it once the client closes or after grace.
        input.resume();
        output.end();
        await new Promise<void>((r) => {
          const t = setTimeout(r, graceMs);
          t.unref();
          input.once("close", () => {
            clearTimeout(t);
            r();
          });
        });
      }
      input.destroy();
      resolveDone();
    })();
    return ending;
  };

  const handle = async (msg: ClientMessage): Promise<void> => {
    switch (msg.type) {
      case "initialize":
        initialized = true;
        await out.emit(() =>
          JSON.stringify({ type: "initialized", request_id: msg.request_id, protocol_version: PROTOCOL_VERSION, server: deps.server }),
        );
        return;
      case "daemon.control": {
        if (deps.daemonControl === undefined) {
          await out.error({ code: "unsupported", message: "daemon.control is not available on this transport (use the daemon socket)", request_id: msg.request_id });
          return;
        }
        const r = await deps.daemonControl(msg.command, msg.request_id);
        await (typeof r === "string" ? out.emit(() => r) : out.error(r));
        return;
      }
      case "session.start": {
        if (session !== null) {
          await out.error({ code: "invalid_request", message: "this connection already has a session (one session per connection)", request_id: msg.request_id });
          return;
        }
        const r = await deps.openSession(msg, out);
        if ("code" in r) await out.error(r);
        else if (ending !== null) await r.close();
        else session = r;
        return;
      }
      case "approval.resolve":
      case "queue.move":
      case "queue.remove":
      case "queue.update":
      case "session.clear":
      case "session.pause":
      case "session.mcp":
      case "session.tools":
      case "turn.cancel":
      case "turn.start":
      default:
        if (session === null || session.id !== msg.session_id) {
          await out.error({ code: "session_not_found", message: "no such session on this connection", request_id: msg.request_id });
          return;
        }
        await session.handle(msg);
    }
  };

  const run = async (): Promise<void> => {
    const splitter = new LineSplitter(MAX_CLIENT_FRAME_BYTES + 2);
    const onLine = async (bytes: Buffer | null): Promise<boolean> => {
      if (bytes === null || bytes.length > MAX_CLIENT_FRAME_BYTES) {
        await out.error({ code: "invalid_request", message: MESSAGES.frameTooLarge });
        return true;
      }
      if (bytes.length === 0) return true;
      const text = decodeRecord(bytes);
      if (text === null) {
        await out.error({ code: "invalid_json", message: MESSAGES.notUtf8 });
        return true;
      }
      const d = decodeMessage(text, { initialized });
      if (!d.ok) {
        await out.error(d.error);
        return d.error.fatal !== true;
      }
      await handle(d.msg);
      return true;
    };
    // Event-driven rather than `for await`: leaving a for-await loop destroys the stream, which on a socket would
    // also destroy our output before the last frames are out.
    await new Promise<void>((resolveRun) => {
      let chain: Promise<void> = Promise.resolve();
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        input.off("data", onData);
        resolveRun();
      };
      const lines = async (frames: ReturnType<LineSplitter["push"]>): Promise<boolean> => {
        for (const f of frames) {
          if (!reading) return false;
          if (!(await onLine(f.kind === "record" ? f.bytes : null))) return false;
        }
        return reading;
      };
      const onData = (chunk: Buffer | string): void => {
        input.pause();
        const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
        chain = chain.then(async () => {
          if (finished) return;
          if (await lines(splitter.push(bytes))) input.resume();
          else finish();
        });
      };
      input.on("data", onData);
      input.once("end", () => {
        chain = chain.then(async () => {
          if (!finished) await lines(splitter.end());
          finish();
        });
      });
      input.once("close", () => void chain.then(finish));
      input.on("error", () => undefined);
    }).catch(() => undefined);
    await cleanup();
  };

  void run();
  return {
    done,
    stop: () => cleanup(),
    get outputFailure() {
      return outputFailure;
    },
  };
}
