/**
 * `daemon.control` (socket only): the actions, their payload checks, and the `daemon.status` reply frame.
 *
 * Contract:
 * - An action this daemon does not know is `invalid_json` (how a client tells the daemon predates it), with the fixed
 *   `UNKNOWN_ACTION` message: the action is not echoed.
 * - A known action with a bad field is `invalid_request` naming the field; unknown fields are ignored.
 * - Replies carry the request ID but no session ID or `seq`.
 * - A `confirm_ask` question must have visible text (not only whitespace, controls or format characters); the
 *   question the daemon sends has every control shown as `<U+XXXX>` (`visibleControls`), so nothing in it can act
 *   on a chat client or a terminal that shows it.
 */
import { utf8Length } from "../../core/utf8.js";
import { visibleControls } from "../../core/visible-controls.js";
import type { ControlCommand, WireError } from "./wire.js";

export const MAX_CONFIRM_QUESTION_BYTES = 4096;
export const CONFIRM_DEFAULT_SECONDS = 1800;
export const CONFIRM_MAX_SECONDS = 14_400;
export const RESTART_DEFAULT_WAIT_SECONDS = 600;
export const RESTART_MAX_WAIT_SECONDS = 3600;
/** `parent` (an `SCV_PARENT` chain `<instance>/<session>/<handle>`) and `version`/`commit` are bounded (Berth's choice). */
export const MAX_PARENT_BYTES = 1024;
export const MAX_VERSION_BYTES = 128;

export type ControlAction =
  | { action: "status" }
  | { action: "reload" }
  | {
      action: "channel_set";
      channel: string;
      account: string;
      enabled?: boolean;
      workspace?: string;
      remote_tools?: "none" | "owner";
      senders?: "owner" | "anyone";
    }
  | { action: "channel_logout"; channel: string; account: string }
  | { action: "delegations"; all: boolean }
  | { action: "delegation_kill"; handle?: string; orphans: boolean }
  | { action: "restart_when_idle"; version?: string; commit?: string; parent?: string; max_wait_seconds: number }
  | { action: "confirm_ask"; question: string; parent?: string; timeout_seconds: number }
  | { action: "confirm_status"; id: string };

export type ControlName = ControlAction["action"];

type C = Record<string, unknown>;
type R<T> = T | { bad: string };
const bad = (m: string): { bad: string } => ({ bad: m });
const isBad = (v: unknown): v is { bad: string } => typeof v === "object" && v !== null && "bad" in v;

function optString(c: C, k: string): R<string | undefined> {
  const v = c[k];
  if (v === undefined || v === null) return undefined;
  return typeof v === "string" && v !== "" ? v : bad(`\`command.${k}\` must be a non-empty string`);
}
function boundedString(c: C, k: string, max: number): R<string | undefined> {
  const v = optString(c, k);
  if (typeof v === "string" && utf8Length(v) > max) return bad(`\`command.${k}\` exceeds ${max} bytes; pass the value as given to you (\`SCV_PARENT\`, \`berth build-info\`)`);
  return v;
}
function optBool(c: C, k: string): R<boolean | undefined> {
  const v = c[k];
  if (v === undefined || v === null) return undefined;
  return typeof v === "boolean" ? v : bad(`\`command.${k}\` must be a boolean`);
}
function optEnum<T extends string>(c: C, k: string, values: readonly T[]): R<T | undefined> {
  const v = c[k];
  if (v === undefined || v === null) return undefined;
  return typeof v === "string" && (values as readonly string[]).includes(v) ? (v as T) : bad(`\`command.${k}\` must be one of ${values.join(", ")}`);
}
function seconds(c: C, k: string, dflt: number, max: number): R<number> {
  const v = c[k];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1 || v > max) return bad(`\`command.${k}\` must be an integer from 1 to ${max}`);
  return v;
}

type Parser = (c: C) => R<ControlAction>;

/** Fields collected in order; the first bad one wins. */
function collect<T extends Record<string, unknown>>(fields: { [K in keyof T]: R<T[K]> }): R<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (isBad(v)) return v;
    if (v !== undefined) out[k] = v;
  }
  return out as T;
}

const PARSERS: Record<ControlName, Parser> = {
  status: () => ({ action: "status" }),
  reload: () => ({ action: "reload" }),
  channel_set: (c) =>
    collect({
      action: "channel_set" as const,
      channel: optString(c, "channel") ?? bad("`command.channel` is required (wechat or feishu)"),
      account: optString(c, "account") ?? "default",
      enabled: optBool(c, "enabled"),
      workspace: optString(c, "workspace"),
      remote_tools: optEnum(c, "remote_tools", ["none", "owner"] as const),
      senders: optEnum(c, "senders", ["owner", "anyone"] as const),
    }) as R<ControlAction>,
  channel_logout: (c) =>
    collect({
      action: "channel_logout" as const,
      channel: optString(c, "channel") ?? bad("`command.channel` is required (wechat or feishu)"),
      account: optString(c, "account") ?? "default",
    }),
  delegations: (c) => collect({ action: "delegations" as const, all: optBool(c, "all") ?? false }),
  delegation_kill: (c) =>
    collect({ action: "delegation_kill" as const, handle: optString(c, "handle"), orphans: optBool(c, "orphans") ?? false }) as R<ControlAction>,
  restart_when_idle: (c) =>
    collect({
      action: "restart_when_idle" as const,
      version: boundedString(c, "version", MAX_VERSION_BYTES),
      commit: boundedString(c, "commit", MAX_VERSION_BYTES),
      parent: boundedString(c, "parent", MAX_PARENT_BYTES),
      max_wait_seconds: seconds(c, "max_wait_seconds", RESTART_DEFAULT_WAIT_SECONDS, RESTART_MAX_WAIT_SECONDS),
    }) as R<ControlAction>,
  confirm_ask: (c) => {
    const q = c["question"];
    if (typeof q !== "string" || q.trim() === "") return bad("`command.question` must be a non-empty string");
    if (utf8Length(q) > MAX_CONFIRM_QUESTION_BYTES) return bad(`\`command.question\` exceeds ${MAX_CONFIRM_QUESTION_BYTES} bytes; shorten it`);
    if (!/[^\p{C}\p{Z}\s]/u.test(q)) return bad("`command.question` has no visible text; write the question");
    return collect({
      action: "confirm_ask" as const,
      question: visibleControls(q),
      parent: boundedString(c, "parent", MAX_PARENT_BYTES),
      timeout_seconds: seconds(c, "timeout_seconds", CONFIRM_DEFAULT_SECONDS, CONFIRM_MAX_SECONDS),
    }) as R<ControlAction>;
  },
  confirm_status: (c) => collect({ action: "confirm_status" as const, id: optString(c, "id") ?? bad("`command.id` is required") }),
};

/**
 * The refusal of an action this daemon does not know: fixed, naming the field and the actions it does know. The
 * action itself is not echoed (no refusal here echoes the client's text: it could carry terminal controls or a
 * pasted credential back to whatever shows the error).
 */
export const UNKNOWN_ACTION = `unknown \`command.action\`: this daemon knows ${Object.keys(PARSERS).join(", ")}; an action added later needs a newer daemon`;

/** Validates a command: the action (unknown → `invalid_json`), then its fields (→ `invalid_request`). */
export function parseControl(cmd: ControlCommand, requestId: string): ControlAction | WireError {
  const parser = Object.hasOwn(PARSERS, cmd.action) ? PARSERS[cmd.action as ControlName] : undefined;
  if (parser === undefined) return { code: "invalid_json", message: UNKNOWN_ACTION, request_id: requestId };
  const r = parser(cmd);
  if (isBad(r)) return { code: "invalid_request", message: r.bad, request_id: requestId };
  return r;
}

export interface DelegationEntry {
  handle: string;
  agent: string;
  session: string;
  depth: number;
  pid: number;
  owner_pid: number;
  processes: number;
  cwd: string;
  started_unix_seconds: number;
  orphaned: boolean;
  conversation?: string;
  turn?: number;
}

export interface DaemonStatus {
  version: string;
  pid: number;
  components: unknown[];
  delegations: { active: number; reaped: number; entries?: DelegationEntry[]; killed?: string[] };
  restart?: Record<string, unknown>;
  confirm?: { id: string; state: string; chat: string | null; deadline_unix_seconds: number };
  /**
   * What a session that names no `provider`/`model` runs now (the daemon's environment, launch directory and home
   * settings); absent when the settings cannot be read. `berth chat`'s banner names it.
   */
  selection?: { provider: string; model: string | null };
}

export function daemonStatusFrame(requestId: string, status: DaemonStatus): string {
  return JSON.stringify({ type: "daemon.status", request_id: requestId, status });
}
