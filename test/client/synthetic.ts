/**
 * A synthetic app-service server for consumer tests: the test reads the client's request records and writes
 * hand-made response/event records back. Real client code, real streams; only the server side is scripted.
 */
import { PassThrough } from "node:stream";
import { AppServiceClient, type ClientOptions } from "../../src/client/app-service/index.js";

export const LIMITS = {
  max_record_bytes: 65536,
  max_payload_bytes: 32768,
  max_error_message_bytes: 512,
  max_id_bytes: 128,
  max_name_bytes: 64,
  max_string_bytes: 16384,
  max_json_depth: 32,
  max_array_items: 64,
  max_object_fields: 64,
  max_negotiation_items: 8,
  max_session_attachments: 16,
  max_session_page_items: 32,
  max_session_replay_page_bytes: 16384,
  max_session_replay_window_bytes: 2097152,
  max_session_list_scan_entries: 20000,
  max_catalog_page_items: 32,
};

export const OPERATIONS = [
  "initialize", "status", "capabilities", "session.list", "session.create", "session.open", "session.replay", "session.close",
  "turn.start", "turn.cancel", "auth.status", "auth.login.start", "auth.login.callback", "auth.login.cancel", "auth.logout",
  "catalog.providers", "catalog.models", "catalog.refresh", "config.get", "config.set",
];
export const EVENTS = ["turn.started", "turn.assistant_delta", "turn.activity", "turn.terminal", "auth.login.progress", "auth.login.terminal"];

export function initPayload(edit: (p: any) => void = () => {}): Record<string, any> {
  const p: any = {
    protocol_version: 1,
    server_name: "berth",
    server_version: "0.1.0",
    limits: { ...LIMITS },
    capabilities: {
      protocol_versions: [1],
      operations: [...OPERATIONS],
      events: [...EVENTS],
      transports: ["stdio"],
      limits: { ...LIMITS },
      activity: { events: true, approvals: false, steering: false, mcp_server_lifecycle: false, mcp_tool_activity: true, subagents: true, raw_tool_output: false, activity_replay: false, max_summary_bytes: 2048 },
    },
  };
  edit(p);
  return p;
}

export interface Req {
  protocol_version: number;
  kind: string;
  request_id: string;
  session_id?: string | null;
  method: string;
  payload: Record<string, any>;
}

export class Synthetic {
  readonly toClient = new PassThrough();
  readonly fromClient = new PassThrough();
  readonly client: AppServiceClient;
  readonly requests: Req[] = [];
  private buf = "";
  private waiters: Array<() => void> = [];
  failures: Error[] = [];
  private eventN = 0;

  constructor(opts: Partial<ClientOptions> = {}) {
    this.fromClient.setEncoding("utf8");
    this.fromClient.on("data", (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf("\n")) >= 0) {
        this.requests.push(JSON.parse(this.buf.slice(0, i)) as Req);
        this.buf = this.buf.slice(i + 1);
      }
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    });
    this.client = new AppServiceClient({ input: this.toClient, output: this.fromClient, onFailure: (e) => this.failures.push(e), ...opts });
  }

  /** The n-th request (0-based), waiting for it to be written. */
  async request(n: number): Promise<Req> {
    while (this.requests.length <= n) await new Promise<void>((r) => this.waiters.push(r));
    return this.requests[n]!;
  }

  /** Writes a raw line (a newline is appended). */
  raw(line: string): void {
    this.toClient.write(line + "\n");
  }

  send(record: Record<string, unknown>): void {
    this.raw(JSON.stringify(record));
  }

  respond(req: Req, payload: Record<string, unknown> | null, extra: Record<string, unknown> = {}, error: Record<string, unknown> | null = null): void {
    this.send({ protocol_version: 1, kind: "response", request_id: req.request_id, session_id: req.session_id ?? null, method: req.method, payload, error, ...extra });
  }

  event(req: Req, event: string, sessionId: string | null, payload: Record<string, unknown>, extra: Record<string, unknown> = {}): void {
    this.send({ protocol_version: 1, kind: "event", event_id: `ev-${++this.eventN}`, request_id: req.request_id, session_id: sessionId, event, payload, ...extra });
  }

  /** Runs initialize against `payload` (default: the current v1 advertisement). */
  async init(payload: Record<string, unknown> = initPayload()): Promise<unknown> {
    const n = this.requests.length;
    const p = this.client.initialize();
    const req = await this.request(n);
    this.respond(req, payload);
    return p;
  }

  /** Starts a turn: accepts it and emits turn.started. */
  async turn(sessionId = "s-1", turnId = "t-1") {
    const n = this.requests.length;
    const p = this.client.startTurn({ prompt: "hi", sessionId });
    const req = await this.request(n);
    this.respond(req, { turn_id: turnId, session_id: sessionId, status: "accepted" });
    this.event(req, "turn.started", sessionId, { turn_id: turnId, session_id: sessionId, status: "started", sequence: 0 });
    return { turn: await p, req };
  }
}

export const terminal = (seq: number, edit: (p: any) => void = () => {}): Record<string, unknown> => {
  const p: any = { turn_id: "t-1", session_id: "s-1", status: "completed", assistant_text: "Hello world", sequence: seq, activity_dropped: 0, activity_replay_available: false, replay_required: true };
  edit(p);
  return p;
};
