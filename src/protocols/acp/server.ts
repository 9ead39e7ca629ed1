/**
 * `berth acp`'s connection: the SDK's agent app with Berth's method families registered, over one NDJSON stream.
 *
 * Contracts:
 * - Frames are the SDK's (one JSON-RPC message per LF-terminated line; `-32700` for unparsable lines, `-32600`
 *   for requests before `initialize`); params are validated against ACP's schema before a handler runs (`-32602`).
 *   Requests pipelined behind `initialize` are read once it is answered (initialize-first.ts), not refused. A line
 *   past `MAX_MESSAGE_BYTES` is answered `-32600` and skipped; the connection goes on (wire.ts).
 * - Errors Berth raises are the fixed `ACP_ERRORS`; any other failure is answered with a fixed internal error.
 * - `serveAcp` resolves when the connection closes (the client's EOF) or `stop` settles; every running turn is then
 *   cancelled (its tool processes stopped, its terminal record written) and every open session released before it
 *   resolves.
 */
import { agent } from "@agentclientprotocol/sdk";
import { AuthStore } from "../../store/auth/auth-store.js";
import { AcpConnection } from "./connection.js";
import type { AcpConnectionState, AcpDeps } from "./context.js";
import { registerInitialize } from "./initialize.js";
import { registerList } from "./list.js";
import { registerPrompt } from "./prompt.js";
import { registerSessions } from "./sessions.js";
import { acpWire } from "./wire.js";

export interface AcpServeOptions {
  input: ReadableStream<Uint8Array>;
  output: WritableStream<Uint8Array>;
  deps: AcpDeps;
  /** Settles to end the connection as the client's EOF would (a signal), whatever the client still sends. */
  stop?: Promise<void>;
}

export async function serveAcp(o: AcpServeOptions): Promise<void> {
  const state: AcpConnectionState = { client: {} };
  const auth = new AuthStore(o.deps.home);
  const conn = new AcpConnection(o.deps, state, auth);
  const app = agent({ name: "berth" });
  registerInitialize(app, o.deps, state, auth);
  registerList(app, conn.hub, o.deps.log);
  registerSessions(app, conn);
  registerPrompt(app, conn);
  const c = app.connect(acpWire(o.output, o.input));
  try {
    await (o.stop === undefined ? c.closed : Promise.race([c.closed, o.stop]));
  } finally {
    await conn.shutdown();
  }
}
