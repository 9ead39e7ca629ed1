/**
 * What a `SessionRuntime` is built on (the agent, the session manager) and what admission returns.
 */
import type { FailureReason, TurnOutcome } from "../events.js";
import type { RunTurnRequest, SelectionOverride, SessionModelInfo, SessionToolsSpec } from "../agent.js";
import type { McpServerInfo, SessionToolInfo } from "../tool-registries.js";
import { SessionError, type HistoryBounds, type SessionManager } from "../../store/sessions/index.js";
import type { AdmissionError } from "./types.js";

/** What the session runtime needs from the agent (an `Agent`). */
export interface TurnRunner {
  runTurn(req: RunTurnRequest): Promise<TurnOutcome>;
  close(): Promise<void>;
  /** The provider/model/context window a turn with this selection would use (`Agent.describe`). */
  describe?(selection?: SelectionOverride): Promise<SessionModelInfo | null>;
  /** Prepares an opened session's tools (its MCP servers start now); `onMcp` gets their state changes. */
  openSession?(s: SessionToolsSpec, onMcp?: (servers: McpServerInfo[]) => void): Promise<void>;
  /** Stops a closed session's MCP servers. */
  closeSession?(sessionId: string): Promise<void>;
  /** A session's MCP servers and their states. */
  mcpStatus?(sessionId: string): McpServerInfo[];
  /** The tools a session offers now (built-ins and its ready MCP servers'). */
  toolList?(sessionId: string): SessionToolInfo[];
}

export interface SessionDeps {
  manager: SessionManager;
  runner: TurnRunner;
  historyBounds?: HistoryBounds;
  /**
   * A history past its bounds at admission: `trim` (default) takes the oldest turns out of the model context
   * (trim.ts, `session_trimmed`); `refuse` refuses the turn (`history_incomplete`), for a door whose protocol
   * requires it (the app-service).
   */
  historyPolicy?: "trim" | "refuse";
  /** ID source for turns, queue entries and approvals (default: UUIDs). */
  newId?: () => string;
}

/** An admitted turn: its ID, and a promise settled once it ended and its lease was released. */
export interface StartedTurn {
  ok: true;
  turnId: string;
  done: Promise<void>;
}
export type StartResult = StartedTurn | { ok: false; error: AdmissionError };

export function admissionError(e: unknown): AdmissionError {
  return e instanceof SessionError ? e.code : "internal";
}

/** What a queued turn that could not be admitted reports: its failure reason, and a sentence naming the cause. */
export function admissionFailure(a: AdmissionError): { reason: FailureReason; message?: string } {
  if (a === "history_incomplete") return { reason: "history" };
  const message = ADMISSION_MESSAGES[a];
  return message === undefined ? { reason: "internal" } : { reason: "internal", message };
}

const ADMISSION_MESSAGES: Partial<Record<AdmissionError, string>> = {
  busy: "the session's file is locked by another Berth process; try again in a few seconds, or continue the session where it is open",
  unavailable: "the session's file cannot be read (missing, unreadable or damaged); check the sessions folder in Berth's home (MC_HOME)",
  lost: "another Berth process took this session over; continue it there, or open it again here",
  closed: "the session was closed before the turn could start",
};
