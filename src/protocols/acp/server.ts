/**
 * `berth acp`'s connection: the SDK's agent app with Berth's method families registered, over one NDJSON stream.
 *
 * Contracts:
 * - Frames are the SDK's (one JSON-RPC message per LF-terminated line; `-32700` for unparsable lines, `-32600`
 *   for requests before `initialize`); params are validated against ACP's schema before a handler runs (`-32602`).
 *   Requests pipelined behind `initialize` are read once it is answered (initialize-first.ts), not refused. A line
 *   past `MAX_MESSAGE_BYTES` is answered `-32600` and skipped; the connection goes on (wire.ts).
 * - Errors Berth raises are the fixed `ACP_ERRORS`; any other failure is answered with a fixed internal error.
 * - At the client's EOF every running turn is cancelled at once, and every other request read before it runs to its
 *   answer (wire.ts, input-end.ts); the connection closes once they are answered (or the wait's bounds pass).
 * - `serveAcp` resolves when the connection closes or `stop` settles (a signal: nothing more is waited for); every
 *   running turn is then cancelled (its tool processes stopped, its terminal record written) and every open session
 *   released before it resolves.
 */
import { agent } from "@agentclientprotocol/sdk";
import { AuthStore } from "../../store/auth/auth-store.js";
import { AcpConnection } from "./connection.js";
import type { AcpConnectionState, AcpDeps } from "./context.js";
import { registerInitialize } from "./initialize.js";
import { registerList } from "./list.js";
import { registerPrompt } from "./prompt.js";
import { registerSessions } from "./sessions.js";
import { END_IDLE_MS, type EndOptions, type GaveUp } from "./input-end.js";
import { acpWire } from "./wire.js";

export interface AcpServeOptions {
  input: ReadableStream<Uint8Array>;
  output: WritableStream<Uint8Array>;
  deps: AcpDeps;
  /** Settles to end the connection at once (a signal), whatever the client still sends or waits for. */
  stop?: Promise<void>;
  /** The bounds of the wait at EOF for the answers to requests read before it (input-end.ts). */
  end?: Omit<EndOptions, "onGiveUp">;
}

/** How the connection ended. */
export interface AcpServed {
  /**
   * At EOF, the wait for the answers was given up because the output took no write for its grace period (an editor
   * holding stdout open unread): the caller need not grant stdout that grace again.
   */
  outputStalled: boolean;
}

export async function serveAcp(o: AcpServeOptions): Promise<AcpServed> {
  const state: AcpConnectionState = { client: {} };
  const auth = new AuthStore(o.deps.home);
  const conn = new AcpConnection(o.deps, state, auth);
  const app = agent({ name: "berth" });
  registerInitialize(app, o.deps, state, auth);
  registerList(app, conn.hub, o.deps.log);
  registerSessions(app, conn);
  registerPrompt(app, conn);
  let outputStalled = false;
  const onGiveUp = (g: GaveUp): void => {
    outputStalled = g.why === "stalled";
    const one = g.unanswered === 1;
    const n = one ? "1 request" : `${g.unanswered} requests`;
    o.deps.log(
      g.why === "stalled"
        ? `berth acp: stdin ended and stdout is not being read; ending without the answers to ${n} read before the end`
        : `berth acp: stdin ended; ${n} read before it ${one ? "was" : "were"} still unanswered after ${(o.end?.idleMs ?? END_IDLE_MS) / 1000} s in which nothing was written; ending without ${one ? "its answer" : "their answers"}`,
    );
  };
  const c = app.connect(acpWire(o.output, o.input, { observe: (s) => conn.order.observe(s), onInputEnd: () => conn.endOfInput(), end: { ...o.end, onGiveUp } }));
  try {
    await (o.stop === undefined ? c.closed : Promise.race([c.closed, o.stop]));
  } finally {
    await conn.shutdown();
  }
  return { outputStalled };
}
