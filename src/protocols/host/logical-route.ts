/**
 * One logical session registration on a backend connection: a dedicated connection's only route,
 * or one multiplexed (v8) route. It delivers frames while it is current and not retired.
 */
import type { BackendConn } from "./backend-conn.js";
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
