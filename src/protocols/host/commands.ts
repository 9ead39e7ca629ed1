/**
 * Backend command correlation. Contracts:
 *  - `send` assigns a fresh `commandId`; its outcome callback fires exactly once;
 *  - a frame the route refuses to deliver is `rejected` with `notSent` (the host's refusal, not the backend's), never
 *    indeterminate;
 *  - after delivery, a lost connection or the COMMAND_DEADLINE_MS deadline is `indeterminate`;
 *    nothing is ever replayed;
 *  - a result settles a command only when the caller proves it came from the delivering route;
 *  - at most MAX_UNANSWERED commands wait for answers on one backend connection: past it a command is `rejected`
 *    unsent, naming the cause and the fix (a backend that never answers cannot make the host keep a record per
 *    client dispatch for the whole deadline).
 */
import { randomUUID } from "node:crypto";
import { COMMAND_DEADLINE_MS, type CommandOutcome, type Json, type ProviderRoute, type SessionRoute } from "./model.js";

export type AnyRoute = SessionRoute | ProviderRoute;

/** Commands that may wait for answers on one backend connection (see docs/host.md). */
export const MAX_UNANSWERED = 1024;

/** Why the host sent nothing to a backend that is not connected, and what to do. */
export const NOT_CONNECTED = "it is not connected; retry once it reconnects";

/** The host's own refusal of a command it did not send: `reason` names why and the fix. */
export const notSent = (reason: string): CommandOutcome => ({ kind: "rejected", error: reason, notSent: true });

/** What a client is told when the host refused a command itself: who refused, why and the fix. */
export const hostRefused = (reason: string): string => `the host did not send this to the backend: ${reason}`;

/** A client action refused because its session's backend is not connected. */
export const NOT_CONNECTED_REFUSAL = hostRefused(NOT_CONNECTED);

/**
 * The reason a client's action is rejected with when its command was not accepted: the host's own refusal, the
 * backend's (its text quoted, or `backendText` where a fixed text stands for it), or an unknown outcome.
 */
export function refusal(o: Exclude<CommandOutcome, { kind: "accepted" }>, backendText?: string, indeterminateText = "backend outcome indeterminate"): string {
  if (o.kind === "indeterminate") return indeterminateText;
  if (o.notSent) return hostRefused(o.error);
  return backendText ?? `backend refused: ${o.error}`;
}

/** The connection a route's commands travel on (a multiplexed session's is its provider's). */
const connOf = (r: AnyRoute): object => ("conn" in r && r.conn && typeof r.conn === "object" ? r.conn : r);

interface PendingCommand {
  commandId: string;
  route: AnyRoute;
  onOutcome: (o: CommandOutcome) => void;
  timer: NodeJS.Timeout;
}

export class CommandTracker {
  readonly pending = new Map<string, PendingCommand>();
  /** Unanswered commands per backend connection. */
  private readonly perConn = new Map<object, number>();

  constructor(private readonly log: (msg: string) => void) {}

  /**
   * Send a correlated command; the outcome callback fires exactly once. Returns the command ID
   * (`commandId`, when given, is a fresh UUID the caller already bound into the payload).
   */
  send(route: AnyRoute, frame: Json, onOutcome: (o: CommandOutcome) => void, commandId: string = randomUUID()): string {
    frame.commandId = commandId;
    const conn = connOf(route);
    const waiting = this.perConn.get(conn) ?? 0;
    if (waiting >= MAX_UNANSWERED) {
      onOutcome(notSent(`${waiting} commands to it are unanswered, the most this host keeps; retry once it answers them (or their ${COMMAND_DEADLINE_MS / 1000} s deadline passes)`));
      return commandId;
    }
    this.perConn.set(conn, waiting + 1);
    const timer = setTimeout(() => this.settle(commandId, { kind: "indeterminate", error: "no command_result before the deadline" }), COMMAND_DEADLINE_MS);
    timer.unref();
    this.pending.set(commandId, { commandId, route, onOutcome, timer });
    if (!route.deliver(frame)) {
      this.pending.delete(commandId);
      this.release(conn);
      clearTimeout(timer);
      onOutcome(notSent(NOT_CONNECTED));
    }
    return commandId;
  }

  /** Settle a pending command. Returns false when the ID is unknown or from another route. */
  settle(commandId: string, o: CommandOutcome, from?: AnyRoute | ((r: AnyRoute) => boolean)): boolean {
    const p = this.pending.get(commandId);
    if (!p) return false;
    if (from !== undefined && (typeof from === "function" ? !from(p.route) : p.route !== from)) return false;
    this.pending.delete(commandId);
    this.release(connOf(p.route));
    clearTimeout(p.timer);
    try {
      p.onOutcome(o);
    } catch (e) {
      this.log(`command outcome handler failed: ${String(e)}`);
    }
    return true;
  }

  private release(conn: object): void {
    const n = (this.perConn.get(conn) ?? 1) - 1;
    if (n > 0) this.perConn.set(conn, n);
    else this.perConn.delete(conn);
  }

  /** A route went away: every delivered, unsettled command on it becomes indeterminate. */
  failRoute(match: (r: AnyRoute) => boolean): void {
    for (const [id, p] of [...this.pending]) if (match(p.route)) this.settle(id, { kind: "indeterminate", error: "backend connection lost after delivery" });
  }
}
