/**
 * `ScvClient`: the typed SCV v3 client, and the chat bridges' `ChatSessionDriver` over it.
 *
 * Turn contract (`runTurn`): sends `turn.start` (prompt + attachments) and follows the events carrying its
 * request_id (queued turns start later under the same id). The result is the LAST `assistant.completed` content of
 * the turn (the final assistant message; deltas, tools and progress are never surfaced), plus every successful
 * `chat_attach` call's `attached` file from `tool.completed`. `approval.requested` is answered with approval only
 * in a session started with `auto_approve: true`, with denial otherwise. Aborting the signal sends `turn.cancel`
 * (as soon as the turn id is known). Exactly one terminal event ends it: `turn.completed` → completed,
 * `turn.failed` or an `error` → failed, `turn.cancelled` → cancelled. A closed connection rejects.
 */
import type { Readable, Writable } from "node:stream";
import type { ChatSessionDriver, ChatSessionOptions, OutboundFile, TurnAttachment, TurnOutcome } from "../../channels/common/driver.js";
import { PROTOCOL_VERSION, ScvConnection, ScvConnectionError, ScvRequestError, type ScvEvent } from "./connection.js";
import { textOf } from "../../core/json-text.js";

export { ScvConnectionError, ScvRequestError } from "./connection.js";

export interface ScvClientInfo {
  name: string;
  version: string;
}

/** `session.start` fields: `cwd` (absolute) plus optional spec fields and Berth's `resume` (a stored session's ID). */
export type SessionStartParams = {
  cwd: string;
  provider?: string;
  model?: string;
  base_url?: string;
  no_tools?: boolean;
  auto_approve?: boolean;
  /** Berth extension: a stored session to continue. */
  resume?: string;
  /** Berth extension: this session's MCP servers (replacing the settings'). */
  mcp_servers?: Record<string, { command: string; args: string[]; env: Record<string, string> }>;
};

export interface RunningTurn {
  readonly requestId: string;
  readonly turnId: string | null;
  cancel(): void;
  readonly done: Promise<ScvEvent>;
}

export type { ScvEvent } from "./connection.js";

export class ScvClient implements ChatSessionDriver {
  readonly conn: ScvConnection;
  private readonly autoApprove = new Map<string, boolean>();
  server: { name: string; version: string } | null = null;

  constructor(input: Readable, output: Writable) {
    this.conn = new ScvConnection(input, output);
  }

  async initialize(client: ScvClientInfo = { name: "berth-channels", version: "0.1.0" }): Promise<void> {
    const ev = await this.conn.request("initialize", { protocol_version: PROTOCOL_VERSION, client }, ["initialized"]);
    if (ev["protocol_version"] !== PROTOCOL_VERSION) {
      this.conn.close(new ScvConnectionError("version_mismatch"));
      throw new ScvRequestError("version_mismatch", `server speaks protocol ${String(ev["protocol_version"])}`);
    }
    const s = ev["server"] as { name?: unknown; version?: unknown } | undefined;
    this.server = { name: textOf(s?.name), version: textOf(s?.version) };
  }

  /** `daemon.control` `status` (daemon socket only): the raw `status` object of `daemon.status`. */
  async daemonStatus(): Promise<Record<string, unknown>> {
    const ev = await this.conn.request("daemon.control", { command: { action: "status" } }, ["daemon.status"]);
    const st = ev["status"];
    if (st === null || typeof st !== "object") throw new ScvConnectionError("daemon.status without a status");
    return st as Record<string, unknown>;
  }

  async startSession(opts: ChatSessionOptions): Promise<string> {
    const ev = await this.conn.request(
      "session.start",
      { cwd: opts.cwd, no_tools: opts.noTools, channel: opts.channel, auto_approve: opts.autoApprove },
      ["session.started"],
    );
    const id = ev["session_id"];
    if (typeof id !== "string" || id === "") throw new ScvConnectionError("session.started without a session_id");
    this.autoApprove.set(id, opts.autoApprove);
    return id;
  }

  runTurn(sessionId: string, prompt: string, attachments: TurnAttachment[], signal: AbortSignal): Promise<TurnOutcome> {
    return new Promise((resolve, reject) => {
      let text: string | null = null;
      const files: OutboundFile[] = [];
      let turnId: string | null = null;
      let cancelSent = false;
      const cancel = (): void => {
        if (turnId === null || cancelSent) return;
        cancelSent = true;
        this.conn.notify("turn.cancel", { session_id: sessionId, turn_id: turnId });
      };
      const finish = (o: TurnOutcome): void => {
        signal.removeEventListener("abort", cancel);
        this.conn.release(rid);
        resolve(o);
      };
      const body: Record<string, unknown> = { session_id: sessionId, prompt };
      if (attachments.length > 0) body["attachments"] = attachments;
      const rid = this.conn.send("turn.start", body, {
        onEvent: (ev: ScvEvent) => {
          switch (ev.type) {
            case "turn.started":
              if (typeof ev["turn_id"] === "string") turnId = ev["turn_id"];
              if (signal.aborted) cancel();
              break;
            case "assistant.completed":
              if (typeof ev["content"] === "string" && ev["content"] !== "") text = ev["content"];
              break;
            case "approval.requested":
              this.conn.notify("approval.resolve", { session_id: sessionId, approval_id: ev["approval_id"], approved: this.autoApprove.get(sessionId) === true });
              break;
            case "tool.completed": {
              const f = ev["name"] === "chat_attach" && ev["success"] === true ? attachedFile(ev["output"]) : null;
              if (f) files.push(f);
              break;
            }
            case "turn.completed":
              return finish({ terminal: "completed", text, files });
            case "turn.cancelled":
              return finish({ terminal: "cancelled", text, files });
            case "turn.failed":
            case "error":
              return finish({ terminal: "failed", text, files });
            default:
              break; // deltas, progress, queue events and unknown types are not a chat's business
          }
        },
        onClose: (err) => {
          signal.removeEventListener("abort", cancel);
          reject(err);
        },
      });
      signal.addEventListener("abort", cancel, { once: true });
    });
  }

  /**
   * `session.start` with any fields (spec fields plus Berth's `resume` extension); resolves with `session.started`
   * (its `session_id`, `cwd`, `model`, `context_max_tokens`), rejects with `ScvRequestError` on a refusal.
   */
  async openSession(params: SessionStartParams): Promise<ScvEvent> {
    const ev = await this.conn.request("session.start", { ...params }, ["session.started"]);
    if (typeof ev["session_id"] !== "string" || ev["session_id"] === "") throw new ScvConnectionError("session.started without a session_id");
    return ev;
  }

  /**
   * Starts (or queues) a turn and hands every event carrying its request_id to `onEvent`, in wire order.
   * `done` resolves with the terminal event (`turn.completed`, `turn.cancelled`, `turn.failed`) or an `error`
   * refusing the request; it rejects when the connection closes first. `cancel()` sends `turn.cancel` once the
   * turn id is known (at once, or when `turn.started` arrives).
   */
  startTurn(sessionId: string, prompt: string, onEvent: (ev: ScvEvent) => void): RunningTurn {
    let turnId: string | null = null;
    let cancelWanted = false;
    let cancelSent = false;
    const sendCancel = (): void => {
      if (turnId === null || cancelSent) return;
      cancelSent = true;
      this.conn.notify("turn.cancel", { session_id: sessionId, turn_id: turnId });
    };
    let rid = "";
    const done = new Promise<ScvEvent>((resolve, reject) => {
      rid = this.conn.send("turn.start", { session_id: sessionId, prompt }, {
        onEvent: (ev) => {
          if (ev.type === "turn.started" && typeof ev["turn_id"] === "string") {
            turnId = ev["turn_id"];
            if (cancelWanted) sendCancel();
          }
          onEvent(ev);
          if (ev.type === "error" || ev.type === "turn.completed" || ev.type === "turn.cancelled" || ev.type === "turn.failed") {
            this.conn.release(rid);
            resolve(ev);
          }
        },
        onClose: reject,
      });
    });
    return {
      requestId: rid,
      get turnId() {
        return turnId;
      },
      cancel: () => {
        cancelWanted = true;
        sendCancel();
      },
      done,
    };
  }

  /** Answers one `approval.requested` (the protocol's answer is per call; "always" is a client's own memory). */
  resolveApproval(sessionId: string, approvalId: string, approved: boolean): void {
    this.conn.notify("approval.resolve", { session_id: sessionId, approval_id: approvalId, approved });
  }

  /** SCV v3 has no session close; a session ends with its connection. */
  closeSession(sessionId: string): Promise<void> {
    this.autoApprove.delete(sessionId);
    return Promise.resolve();
  }
}

/** `{"attached":{"path","name","size","caption"},"note"}` → an outbound file; anything else → null. */
export function attachedFile(output: unknown): OutboundFile | null {
  let v: unknown = output;
  if (typeof output === "string") {
    try {
      v = JSON.parse(output);
    } catch {
      return null;
    }
  }
  const a = (v as { attached?: Record<string, unknown> } | null)?.attached;
  if (!a || typeof a["path"] !== "string" || typeof a["name"] !== "string" || typeof a["size"] !== "number") return null;
  return { path: a["path"], name: a["name"], size: a["size"], caption: typeof a["caption"] === "string" && a["caption"] !== "" ? a["caption"] : null };
}
