/**
 * One logical session registration on a backend connection: a dedicated connection's only route,
 * or one multiplexed (v8) route. It delivers frames while it is current and not retired.
 */
import type { BackendConn } from "./backend-conn.js";
import { EPOCH_REGISTRY_BOUND } from "./backend-schema.js";
import type { ChatCaps, Json, SessionRoute } from "./model.js";

/** One logical session registration (a dedicated connection's only route, or one multiplexed route). */
export class LogicalRoute implements SessionRoute {
  nextSeq = 1;
  retired: "no" | "replaced" | "rejected" | "unregistered" = "no";
  /** v4: `toolCapabilities.clientTools` was advertised (client-tools.ts). */
  clientTools = false;
  /** v6: `hello.multipleWorkingDirectories` (working-dirs.ts) and `inputCapabilities.drafts` (chat-drafts.ts). */
  workingDirs?: { immutablePrimary: boolean; primaryReplacement?: boolean };
  inputDrafts?: boolean;
  constructor(
    readonly logicalId: string,
    readonly conn: BackendConn,
    readonly sessionUri: string,
    readonly version: number,
    readonly instanceId: string,
    readonly inputCapable: boolean,
    readonly toolCapable: boolean,
    readonly chatCaps: ChatCaps,
    readonly multiplexed: boolean,
    /** Re-registration requires backendConnectionId on every sequenced frame. */
    readonly requireId: boolean,
  ) {}
  deliver(frame: Json): boolean {
    if (this.retired !== "no" || this.conn.closed) return false;
    if (this.multiplexed) frame.backendConnectionId = this.logicalId;
    return this.conn.send(frame);
  }
  dispose(): void {
    this.retired = "unregistered";
    if (this.multiplexed) this.conn.send({ type: "error", code: "backend_disposed", session: this.sessionUri, backendConnectionId: this.logicalId, message: "session disposed" });
    else this.conn.fatal("backend_disposed", "session disposed");
  }
}

/**
 * A provider connection's logical registrations by ID (the spec's per-provider epoch registry). Each
 * session's latest epoch stays known while the connection lives: it is the session's current route, or
 * its failed one, which must keep answering `event_rejected` until the session registers again.
 * Superseded epochs only ever answer `event_epoch_mismatch`, as an unknown ID does, so at most
 * `bound` of them are kept and the oldest is forgotten first; every registration costs O(1).
 */
export class EpochRegistry {
  private readonly byId = new Map<string, LogicalRoute>();
  private readonly latestOf = new Map<string, LogicalRoute>();
  /** Superseded epoch IDs, oldest first. */
  private readonly superseded = new Set<string>();
  constructor(private readonly bound = EPOCH_REGISTRY_BOUND) {}
  get(logicalId: string): LogicalRoute | undefined {
    return this.byId.get(logicalId);
  }
  /** The session's newest registration on this connection (current or not). */
  latest(sessionUri: string): LogicalRoute | undefined {
    return this.latestOf.get(sessionUri);
  }
  /** Epochs known (every session's latest, and the superseded ones kept). */
  get size(): number {
    return this.byId.size;
  }
  /** Records a new epoch as its session's latest; the one it supersedes joins the bounded history. */
  add(route: LogicalRoute): void {
    const prev = this.latestOf.get(route.sessionUri);
    this.byId.set(route.logicalId, route);
    this.latestOf.set(route.sessionUri, route);
    if (!prev) return;
    this.superseded.add(prev.logicalId);
    if (this.superseded.size > this.bound) {
      const oldest = this.superseded.values().next().value as string;
      this.superseded.delete(oldest);
      this.byId.delete(oldest);
    }
  }
}
