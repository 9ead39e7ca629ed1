/**
 * What every ACP method family shares: the composition-root dependencies and the per-connection state.
 * `berth acp` serves exactly one connection per process (an editor spawns one child per agent), so the state lives
 * as long as the process.
 */
import type { ClientCapabilities } from "@agentclientprotocol/sdk";
import type { TurnRunner } from "../../runtime/session/index.js";
import type { EnvLike } from "../../store/home.js";

export interface AcpDeps {
  /** Resolved MC_HOME. */
  home: string;
  /** Launch directory (project settings scope). */
  cwd: string;
  env: EnvLike;
  /** Berth's package version (agentInfo.version). */
  version: string;
  /** One diagnostic line to stderr (never stdout: stdout carries only ACP frames). */
  log: (line: string) => void;
  /** Shows a sign-in URL to the user (the composition root opens a browser; tests record it). */
  openUrl(url: string): void;
  /** The agent every session's turns run on (the composition root builds it). */
  runner: TurnRunner;
}

export interface AcpConnectionState {
  /** The client's capabilities from `initialize` (omitted ones are unsupported). */
  client: ClientCapabilities;
}
