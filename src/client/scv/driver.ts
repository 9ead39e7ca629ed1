/**
 * The chat bridges' `ChatSessionDriver` over SCV v3: one connection per session (the server allows one session per
 * connection), opened by a `Connector` — the daemon's Unix socket, or a `berth stdio` child.
 *
 * Contract: `startSession` opens a connection, initializes and sends `session.start`; a refusal closes that
 * connection and rejects. `closeSession` closes the session's connection (the server then cancels its work).
 * A session whose connection dropped rejects further turns; the bridge starts a fresh session for the next message.
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { connect } from "node:net";
import type { Readable, Writable } from "node:stream";
import type { ChatSessionDriver, ChatSessionOptions, TurnAttachment, TurnOutcome } from "../../channels/common/driver.js";
import { spawnBerth } from "../spawn-berth.js";
import { ScvClient } from "./client.js";

export interface ScvStreams {
  input: Readable;
  output: Writable;
  close(): void;
}

export type Connector = () => Promise<ScvStreams>;

export function unixSocketConnector(path: string): Connector {
  return () =>
    new Promise((resolve, reject) => {
      const sock = connect(path);
      sock.once("connect", () => resolve({ input: sock, output: sock, close: () => sock.destroy() }));
      sock.once("error", () => reject(new Error("cannot connect to the SCV socket: is `berth daemon` running?")));
    });
}

/** Spawns `node <berthBin> stdio` per session (for tests and single-process use). */
export function stdioConnector(berthBin: string, env: NodeJS.ProcessEnv): Connector {
  return () => {
    const child = spawnBerth(berthBin, ["stdio"], env, { stdio: ["pipe", "pipe", "ignore"] }) as ChildProcessWithoutNullStreams;
    return Promise.resolve({ input: child.stdout, output: child.stdin, close: () => void child.stdin.end() });
  };
}

export class ScvDriver implements ChatSessionDriver {
  private readonly sessions = new Map<string, { client: ScvClient; streams: ScvStreams }>();

  constructor(private readonly connect: Connector) {}

  async startSession(opts: ChatSessionOptions): Promise<string> {
    const streams = await this.connect();
    try {
      const client = new ScvClient(streams.input, streams.output);
      await client.initialize();
      const id = await client.startSession(opts);
      this.sessions.set(id, { client, streams });
      return id;
    } catch (err) {
      streams.close();
      throw err;
    }
  }

  runTurn(sessionId: string, prompt: string, attachments: TurnAttachment[], signal: AbortSignal): Promise<TurnOutcome> {
    const s = this.sessions.get(sessionId);
    if (!s) return Promise.reject(new Error("unknown session"));
    return s.client.runTurn(sessionId, prompt, attachments, signal);
  }

  closeSession(sessionId: string): Promise<void> {
    const s = this.sessions.get(sessionId);
    this.sessions.delete(sessionId);
    s?.streams.close();
    return Promise.resolve();
  }

  /** Closes every session's connection. */
  close(): void {
    for (const id of [...this.sessions.keys()]) void this.closeSession(id);
  }
}
