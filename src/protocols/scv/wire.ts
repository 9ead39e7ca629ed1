/**
 * SCV client protocol v3: limits, error codes and client-message decoding (one place for the check order).
 *
 * Check order for one client line (tested in test/scv/wire.test.ts):
 *  1. framing: a line over MAX_CLIENT_FRAME_BYTES (newline excluded, CR stripped) → `invalid_request`, no
 *     `request_id`; the connection goes on.
 *  2. UTF-8 + JSON + object → `invalid_json` (no `request_id`).
 *  3. `type` missing, not a string or unknown → `invalid_json` (with `request_id` when the line carried a string one);
 *     then a string anywhere in the message holding a lone surrogate (a `\uD800`–`\uDFFF` escape without its pair:
 *     not Unicode text, and unparsable for a strict client if echoed) → `invalid_json`, likewise.
 *  4. `request_id` missing or not a string → `invalid_request` without `request_id`.
 *  5. state: anything but `initialize` before initialization → `not_initialized`; a repeated `initialize` →
 *     `invalid_request`; a `protocol_version` that is not a non-negative integer (missing, a string) → `invalid_json`;
 *     an integer other than 3 → `version_mismatch` (fatal; the connection then ends).
 *  6. payload fields of the type → `invalid_request` (unknown fields are ignored).
 *  7. the session-level checks (session_not_found, turn_active, queue_conflict, …) happen in the session module.
 */
import { isWellFormedJson, sanitizeText } from "../../core/text-policy.js";
import { truncateUtf8, utf8Length } from "../../core/utf8.js";

export const PROTOCOL_VERSION = 3;
export const MAX_CLIENT_FRAME_BYTES = 1 << 20;
export const MAX_PROMPT_BYTES = 256 * 1024;
export const MAX_SERVER_FRAME_BYTES = 8 << 20;
export const WRITER_MAX_FRAMES = 256;
export const WRITER_MAX_BYTES = Math.max(16 << 20, 2 * MAX_SERVER_FRAME_BYTES);
export const MAX_ATTACHMENTS = 16;
export const MAX_CHANNEL_BYTES = 32;
export const MAX_QUEUE_ENTRIES = 64;
export const MAX_QUEUE_PROMPT_BYTES = 4 << 20;
/** Advertised in `session.started` for clients that keep a transcript and a prompt history. */
export const MAX_TRANSCRIPT_BYTES = 8 << 20;
export const MAX_TRANSCRIPT_ITEMS = 10_000;
export const MAX_PROMPT_HISTORY_BYTES = 1 << 20;
export const MAX_PROMPT_HISTORY_ITEMS = 200;

/** `scv_protocol::ErrorCode` values Berth emits (snake_case). */
export type ErrorCode =
  | "invalid_json"
  | "invalid_request"
  | "not_initialized"
  | "version_mismatch"
  | "session_not_found"
  | "turn_active"
  | "turn_not_found"
  | "approval_not_found"
  | "queue_not_found"
  | "queue_conflict"
  | "queue_limit"
  | "unsupported"
  | "component_error"
  | "confirm_error"
  | "delegation_error"
  | "restart_error"
  | "provider_error"
  | "response_limit"
  | "tool_limit"
  | "step_limit"
  | "context_limit"
  | "history_limit"
  | "internal_error";

export const ATTACHMENT_KINDS = ["image", "audio", "video", "file", "sticker"] as const;
export type AttachmentKind = (typeof ATTACHMENT_KINDS)[number];

export interface WireAttachment {
  kind: AttachmentKind;
  path: string;
  size: number;
  name?: string;
  mime?: string;
  transcript?: string;
}

export interface WireMcpServer {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export const MAX_SESSION_MCP_SERVERS = 16;

export type ClientMessage =
  | { type: "initialize"; request_id: string; protocol_version: number }
  | { type: "daemon.control"; request_id: string; command: ControlCommand }
  | {
      type: "session.start";
      request_id: string;
      cwd: string;
      provider?: string;
      model?: string;
      base_url?: string;
      no_tools: boolean;
      channel?: string;
      auto_approve: boolean;
      delegation_depth?: number;
      /** Berth extension: continue this stored session instead of creating one (docs/scv.md §Resuming). */
      resume?: string;
      /** Berth extension: this session's MCP servers, replacing the settings' (docs/scv.md §MCP servers). */
      mcp_servers?: Record<string, WireMcpServer>;
    }
  | { type: "turn.start"; request_id: string; session_id: string; prompt: string; attachments: WireAttachment[] }
  | { type: "turn.cancel"; request_id: string; session_id: string; turn_id: string }
  | { type: "approval.resolve"; request_id: string; session_id: string; approval_id: string; approved: boolean }
  | { type: "session.clear"; request_id: string; session_id: string }
  | { type: "session.pause"; request_id: string; session_id: string; paused: boolean }
  /** Berth extension: the session's MCP servers and their states, answered by `session.mcp` (docs/scv.md). */
  | { type: "session.mcp"; request_id: string; session_id: string }
  /** Berth extension: the tools the session offers now (built-ins and MCP tools), answered by `session.tools`. */
  | { type: "session.tools"; request_id: string; session_id: string }
  | { type: "queue.update"; request_id: string; session_id: string; queue_id: string; revision: number; prompt: string }
  | { type: "queue.move"; request_id: string; session_id: string; queue_id: string; revision: number; before_queue_id: string | null }
  | { type: "queue.remove"; request_id: string; session_id: string; queue_id: string; revision: number };

export type MessageType = ClientMessage["type"];

/**
 * A `daemon.control` command as the client sent it: an object with a string `action`; the other fields are
 * validated per action by the control handler (src/protocols/scv/control.ts), which knows the actions.
 */
export type ControlCommand = { action: string } & Record<string, unknown>;

export interface WireError {
  code: ErrorCode;
  message: string;
  /** Omitted on the wire when unknown. */
  request_id?: string;
  fatal?: boolean;
}

export type Decoded = { ok: true; msg: ClientMessage } | { ok: false; error: WireError };

/** The fixed messages (never an exception's text on the wire). */
export const MESSAGES = {
  frameTooLarge: `client frame exceeds ${MAX_CLIENT_FRAME_BYTES} bytes; the line was skipped: send each message as one line of at most ${MAX_CLIENT_FRAME_BYTES} bytes, with prompts of at most ${MAX_PROMPT_BYTES} bytes (attach larger text as a file)`,
  notUtf8: "frame is not valid UTF-8",
  notJson: "frame is not a JSON object",
  noType: "message has no string `type`",
  // At most 64 bytes of the type, cut on a character boundary and without lone surrogates or control characters:
  // a strict client (serde_json) fails to parse a frame holding a lone surrogate escape.
  unknownType: (t: string) => `unknown message type \`${sanitizeText(truncateUtf8(t, 64))}\``,
  loneSurrogate: "message holds a lone surrogate escape (\\uD800-\\uDFFF without its pair); send well-formed Unicode text",
  noRequestId: "message has no string `request_id`",
  notInitialized: "send `initialize` first",
  reinitialize: "the connection is already initialized",
  versionMismatch: (v: number) => `protocol version ${v} is not supported; this server speaks version ${PROTOCOL_VERSION}`,
  versionType: `\`protocol_version\` must be a non-negative integer (this server speaks version ${PROTOCOL_VERSION})`,
  promptTooLarge: `prompt exceeds ${MAX_PROMPT_BYTES} bytes; shorten it, or save the text to a file and attach it`,
  queueLimit: `the queue holds at most ${MAX_QUEUE_ENTRIES} prompts and ${MAX_QUEUE_PROMPT_BYTES} bytes of prompt text; wait for queued prompts to run, or remove some with queue.remove`,
  tooManyAttachments: `at most ${MAX_ATTACHMENTS} attachments per prompt; send the rest with another turn.start`,
  blankPrompt: "`prompt` may be empty (or only whitespace) only with attachments",
} as const;

/**
 * A prompt with nothing to act on: empty or only whitespace, as the reference server counts it (`str::trim`, i.e.
 * Unicode's White_Space: NEL and NBSP are whitespace, a BOM or a zero-width space is not).
 */
export function isBlankPrompt(p: string): boolean {
  return /^\p{White_Space}*$/u.test(p);
}

type Obj = Record<string, unknown>;
type FieldResult<T> = { ok: true; value: T } | { ok: false; message: string };

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function str(o: Obj, k: string, nonEmpty = true): FieldResult<string> {
  const v = o[k];
  if (typeof v !== "string" || (nonEmpty && v === "")) return { ok: false, message: `\`${k}\` must be a${nonEmpty ? " non-empty" : ""} string` };
  return { ok: true, value: v };
}

function optStr(o: Obj, k: string): FieldResult<string | undefined> {
  if (o[k] === undefined || o[k] === null) return { ok: true, value: undefined };
  return str(o, k);
}

function bool(o: Obj, k: string, dflt?: boolean): FieldResult<boolean> {
  const v = o[k];
  if ((v === undefined || v === null) && dflt !== undefined) return { ok: true, value: dflt };
  if (typeof v !== "boolean") return { ok: false, message: `\`${k}\` must be a boolean` };
  return { ok: true, value: v };
}

function uint(o: Obj, k: string): FieldResult<number> {
  const v = o[k];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) return { ok: false, message: `\`${k}\` must be a non-negative integer` };
  return { ok: true, value: v };
}

/** Throw-free field collection: the first failing field wins. */
class Fields {
  message: string | null = null;
  constructor(private readonly o: Obj) {}
  take<T>(r: FieldResult<T>): T {
    if (!r.ok && this.message === null) this.message = r.message;
    return r.ok ? r.value : (undefined as T);
  }
  str(k: string): string {
    return this.take(str(this.o, k));
  }
  optStr(k: string): string | undefined {
    return this.take(optStr(this.o, k));
  }
  bool(k: string, d?: boolean): boolean {
    return this.take(bool(this.o, k, d));
  }
  uint(k: string): number {
    return this.take(uint(this.o, k));
  }
}

function mcpServers(v: unknown): FieldResult<Record<string, WireMcpServer>> {
  const bad = (m: string): FieldResult<Record<string, WireMcpServer>> => ({ ok: false, message: `\`mcp_servers\`${m}` });
  if (!isObj(v)) return bad(" must be an object of servers");
  const names = Object.keys(v);
  if (names.length > MAX_SESSION_MCP_SERVERS) return bad(` holds at most ${MAX_SESSION_MCP_SERVERS} servers; leave out the ones this session does not need`);
  // No prototype: a server named `__proto__` is an entry like any other (on a plain object the assignment would set
  // the prototype and the server would silently vanish).
  const out = Object.create(null) as Record<string, WireMcpServer>;
  for (const name of names) {
    const d = v[name];
    if (!isObj(d) || typeof d.command !== "string" || d.command === "") return bad(`.${name.slice(0, 64)}.command must be a non-empty string`);
    const args = d.args ?? [];
    if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) return bad(`.${name.slice(0, 64)}.args must be an array of strings`);
    const env = d.env ?? {};
    if (!isObj(env) || !Object.values(env).every((x) => typeof x === "string")) return bad(`.${name.slice(0, 64)}.env must map names to strings`);
    out[name] = { command: d.command, args: args, env: env as Record<string, string> };
  }
  return { ok: true, value: out };
}

export function validChannel(v: string): boolean {
  return v !== "" && utf8Length(v) <= MAX_CHANNEL_BYTES && !/[\u0000-\u001f\u007f-\u009f]/.test(v);
}

function attachments(v: unknown): FieldResult<WireAttachment[]> {
  if (v === undefined || v === null) return { ok: true, value: [] };
  if (!Array.isArray(v)) return { ok: false, message: "`attachments` must be an array" };
  if (v.length > MAX_ATTACHMENTS) return { ok: false, message: MESSAGES.tooManyAttachments };
  const out: WireAttachment[] = [];
  for (const [i, a] of v.entries()) {
    if (!isObj(a)) return { ok: false, message: `attachment ${i} must be an object` };
    if (!(ATTACHMENT_KINDS as readonly unknown[]).includes(a.kind))
      return { ok: false, message: `attachment ${i}: \`kind\` must be one of ${ATTACHMENT_KINDS.join(", ")}` };
    if (typeof a.path !== "string" || !a.path.startsWith("/")) return { ok: false, message: `attachment ${i}: \`path\` must be an absolute path` };
    if (typeof a.size !== "number" || !Number.isSafeInteger(a.size) || a.size < 0)
      return { ok: false, message: `attachment ${i}: \`size\` must be a non-negative integer` };
    const att: WireAttachment = { kind: a.kind as AttachmentKind, path: a.path, size: a.size };
    for (const k of ["name", "mime", "transcript"] as const) {
      const s = a[k];
      if (s === undefined || s === null) continue;
      if (typeof s !== "string") return { ok: false, message: `attachment ${i}: \`${k}\` must be a string` };
      att[k] = s;
    }
    out.push(att);
  }
  return { ok: true, value: out };
}

function prompt(f: Fields, o: Obj): string {
  const p = f.take(str(o, "prompt", false));
  if (typeof p === "string" && f.message === null && utf8Length(p) > MAX_PROMPT_BYTES) f.message = MESSAGES.promptTooLarge;
  return p;
}

type Parser = (o: Obj, f: Fields, rid: string) => ClientMessage;

const PARSERS: Record<MessageType, Parser> = {
  initialize: (o, _f, rid) => ({ type: "initialize", request_id: rid, protocol_version: o.protocol_version as number }),
  "daemon.control": (o, f, rid) => {
    const cmd = o.command;
    if (!isObj(cmd) || typeof cmd.action !== "string") f.take({ ok: false, message: "`command.action` must be a string" });
    return { type: "daemon.control", request_id: rid, command: isObj(cmd) ? (cmd as ControlCommand) : { action: "" } };
  },
  "session.start": (o, f, rid) => {
    const cwd = f.str("cwd");
    const provider = f.optStr("provider");
    const model = f.optStr("model");
    const base_url = f.optStr("base_url");
    const no_tools = f.bool("no_tools", false);
    const channel = f.optStr("channel");
    if (channel !== undefined && f.message === null && !validChannel(channel))
      f.message = `\`channel\` must be at most ${MAX_CHANNEL_BYTES} bytes without control characters`;
    const auto_approve = f.bool("auto_approve", false);
    const depth = o.delegation_depth === undefined || o.delegation_depth === null ? undefined : f.uint("delegation_depth");
    const resume = o.resume === undefined || o.resume === null ? undefined : f.optStr("resume");
    const mcp = o.mcp_servers === undefined || o.mcp_servers === null ? undefined : f.take(mcpServers(o.mcp_servers));
    return {
      type: "session.start",
      request_id: rid,
      cwd,
      ...(provider !== undefined ? { provider } : {}),
      ...(model !== undefined ? { model } : {}),
      ...(base_url !== undefined ? { base_url } : {}),
      no_tools,
      ...(channel !== undefined ? { channel } : {}),
      auto_approve,
      ...(depth !== undefined ? { delegation_depth: depth } : {}),
      ...(resume !== undefined ? { resume } : {}),
      ...(mcp !== undefined ? { mcp_servers: mcp } : {}),
    };
  },
  "turn.start": (o, f, rid) => {
    const session_id = f.str("session_id");
    const p = prompt(f, o);
    const att = f.take(attachments(o.attachments));
    if (f.message === null && att.length === 0 && isBlankPrompt(p)) f.message = MESSAGES.blankPrompt;
    return { type: "turn.start", request_id: rid, session_id, prompt: p, attachments: att };
  },
  "turn.cancel": (_o, f, rid) => ({ type: "turn.cancel", request_id: rid, session_id: f.str("session_id"), turn_id: f.str("turn_id") }),
  "approval.resolve": (_o, f, rid) => ({
    type: "approval.resolve",
    request_id: rid,
    session_id: f.str("session_id"),
    approval_id: f.str("approval_id"),
    approved: f.bool("approved"),
  }),
  "session.clear": (_o, f, rid) => ({ type: "session.clear", request_id: rid, session_id: f.str("session_id") }),
  "session.pause": (_o, f, rid) => ({ type: "session.pause", request_id: rid, session_id: f.str("session_id"), paused: f.bool("paused") }),
  "session.mcp": (_o, f, rid) => ({ type: "session.mcp", request_id: rid, session_id: f.str("session_id") }),
  "session.tools": (_o, f, rid) => ({ type: "session.tools", request_id: rid, session_id: f.str("session_id") }),
  "queue.update": (o, f, rid) => ({
    type: "queue.update",
    request_id: rid,
    session_id: f.str("session_id"),
    queue_id: f.str("queue_id"),
    revision: f.uint("revision"),
    prompt: prompt(f, o),
  }),
  "queue.move": (o, f, rid) => ({
    type: "queue.move",
    request_id: rid,
    session_id: f.str("session_id"),
    queue_id: f.str("queue_id"),
    revision: f.uint("revision"),
    before_queue_id: o.before_queue_id === undefined || o.before_queue_id === null ? null : f.str("before_queue_id"),
  }),
  "queue.remove": (_o, f, rid) => ({
    type: "queue.remove",
    request_id: rid,
    session_id: f.str("session_id"),
    queue_id: f.str("queue_id"),
    revision: f.uint("revision"),
  }),
};

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * Whether every string (keys included) of a parsed line is well-formed Unicode. The line was valid UTF-8, so a lone
 * surrogate can only come from a `\u` escape: a line without one (almost all) is not walked.
 */
function wellFormedMessage(text: string, v: unknown): boolean {
  return !SURROGATE_ESCAPE.test(text) || isWellFormedJson(v);
}

export interface DecodeState {
  initialized: boolean;
}

/** Decodes one whole client line (already within the frame limit). Never throws. */
export function decodeMessage(text: string, state: DecodeState): Decoded {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, error: { code: "invalid_json", message: MESSAGES.notJson } };
  }
  if (!isObj(v)) return { ok: false, error: { code: "invalid_json", message: MESSAGES.notJson } };
  const rid = typeof v.request_id === "string" ? v.request_id : undefined;
  const withRid = (e: WireError): Decoded => ({ ok: false, error: rid === undefined ? e : { ...e, request_id: rid } });
  if (typeof v.type !== "string") return withRid({ code: "invalid_json", message: MESSAGES.noType });
  const parser = Object.hasOwn(PARSERS, v.type) ? PARSERS[v.type as MessageType] : undefined;
  if (parser === undefined) return withRid({ code: "invalid_json", message: MESSAGES.unknownType(v.type) });
  if (!wellFormedMessage(text, v)) return withRid({ code: "invalid_json", message: MESSAGES.loneSurrogate });
  if (rid === undefined) return { ok: false, error: { code: "invalid_request", message: MESSAGES.noRequestId } };
  if (v.type === "initialize") {
    if (state.initialized) return withRid({ code: "invalid_request", message: MESSAGES.reinitialize });
    // Not a version number at all (missing, "3", 3.5): a message that does not parse, as for the reference's decoder,
    // so not fatal; another number is a version this server does not speak, which is.
    const pv = v.protocol_version;
    if (typeof pv !== "number" || !Number.isSafeInteger(pv) || pv < 0) return withRid({ code: "invalid_json", message: MESSAGES.versionType });
    if (pv !== PROTOCOL_VERSION) return withRid({ code: "version_mismatch", message: MESSAGES.versionMismatch(pv), fatal: true });
  } else if (!state.initialized) return withRid({ code: "not_initialized", message: MESSAGES.notInitialized });
  const f = new Fields(v);
  const msg = parser(v, f, rid);
  if (f.message !== null) return withRid({ code: "invalid_request", message: f.message });
  return { ok: true, msg };
}

/** Serializes an `error` event. */
export function errorFrame(e: WireError): string {
  return JSON.stringify({
    type: "error",
    ...(e.request_id !== undefined ? { request_id: e.request_id } : {}),
    code: e.code,
    message: e.message,
    fatal: e.fatal === true,
  });
}
