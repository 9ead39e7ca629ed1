/**
 * The control helper of `berth channel`: one `daemon.control` exchange with the running `berth daemon` over its SCV
 * socket, bounded by `CONTROL_TIMEOUT_MS` (the spec's 20 s; `BERTH_CHANNEL_CONTROL_TIMEOUT_MS`, a whole number of milliseconds
 * from 1 to 600,000, sets another, for tests and slow machines).
 *
 * Contract:
 * - `none` only when nothing listens on the socket (no socket file, or the connection is refused): the caller may
 *   then act on the saved files itself.
 * - `ambiguous` when a daemon accepted the connection but gave no answer in time, or closed the connection before
 *   its answer was complete: a mutation may or may not have happened. The caller never retries it; it tells the user
 *   to query status first (`AMBIGUOUS`).
 * - `refused` carries the daemon's error code and message (shown without terminal controls by the caller).
 * - The socket is always destroyed before the promise settles.
 */
import { connect } from "node:net";
import { ScvClient } from "../client/scv/client.js";
import { ScvRequestError } from "../client/scv/connection.js";
import { scvSocketPath } from "./scv-socket.js";
import { berthVersion } from "./version.js";

export const CONTROL_TIMEOUT_MS = 20_000;

/** The exchange's bound: `BERTH_CHANNEL_CONTROL_TIMEOUT_MS` when it is a whole number of ms in 1..600,000, else 20 s. */
export function controlTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  const v = env["BERTH_CHANNEL_CONTROL_TIMEOUT_MS"] ?? "";
  const n = /^\d{1,6}$/.test(v) ? Number(v) : NaN;
  return n >= 1 && n <= 600_000 ? n : CONTROL_TIMEOUT_MS;
}

export type ControlOutcome =
  | { kind: "none" }
  | { kind: "status"; status: Record<string, unknown> }
  | { kind: "refused"; code: string; message: string }
  | { kind: "ambiguous"; why: "timeout" | "closed" }
  /** The socket exists but could not be connected to (its errno code): nothing was sent. */
  | { kind: "unreachable"; code: string };

/** What the user is told after an exchange that neither succeeded nor found no daemon. */
export function failureMessage(r: Exclude<ControlOutcome, { kind: "none" | "status" }>, mutation: boolean, env: NodeJS.ProcessEnv = process.env): string {
  if (r.kind === "refused") return `the daemon refused: ${r.message} (${r.code})`;
  if (r.kind === "unreachable") return `cannot connect to the daemon's socket ${scvSocketPath(env)} (${r.code}); check that it belongs to your berth daemon`;
  return ambiguousMessage(r, mutation, env);
}

/** What the user is told after an ambiguous exchange, for a mutation (`mutation`) or a status query. */
export function ambiguousMessage(o: { why: "timeout" | "closed" }, mutation: boolean, env: NodeJS.ProcessEnv = process.env): string {
  const what =
    o.why === "timeout"
      ? `the running berth daemon did not answer within ${controlTimeoutMs(env) / 1000} s (it may be busy joining channel replacements)`
      : "the running berth daemon closed the connection before its answer was complete";
  return mutation
    ? `${what}; the change may or may not have been made: run \`berth channel status\` before retrying it`
    : `${what}; this does not mean it is down: run \`berth channel status\` again`;
}

export async function daemonControl(command: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): Promise<ControlOutcome> {
  const sock = connect(scvSocketPath(env));
  let timer: NodeJS.Timeout | undefined;
  try {
    const connected = await new Promise<string | null>((resolve) => {
      sock.once("connect", () => resolve(null));
      sock.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "EIO"));
    });
    if (connected === "ENOENT" || connected === "ECONNREFUSED") return { kind: "none" };
    if (connected !== null) return { kind: "unreachable", code: connected.slice(0, 32) };
    sock.on("error", () => undefined);
    const client = new ScvClient(sock, sock);
    const late = new Promise<ControlOutcome>((r) => {
      timer = setTimeout(() => r({ kind: "ambiguous", why: "timeout" }), controlTimeoutMs(env));
    });
    const exchange = (async (): Promise<ControlOutcome> => {
      await client.initialize({ name: "berth-channel", version: berthVersion() });
      const ev = await client.conn.request("daemon.control", { command }, ["daemon.status"]);
      const st = ev["status"];
      return st !== null && typeof st === "object" ? { kind: "status", status: st as Record<string, unknown> } : { kind: "ambiguous", why: "closed" };
    })().catch((e: unknown): ControlOutcome => {
      if (e instanceof ScvRequestError) return { kind: "refused", code: e.code, message: e.message.slice(e.code.length + 2) };
      return { kind: "ambiguous", why: "closed" };
    });
    return await Promise.race([exchange, late]);
  } catch {
    return { kind: "ambiguous", why: "closed" };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    sock.destroy();
  }
}
