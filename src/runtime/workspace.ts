/**
 * The workspace seam: where the file tools (`read`, `write`, `edit`) read and write text files and where `bash` runs
 * commands. Unset (or a method left out): this machine, through the tools' own code. A door whose client owns the
 * files and terminals (an ACP editor advertising `fs` / `terminal`) supplies its own, so the editor sees unsaved
 * buffers, tracks edits and shows the commands in its terminals.
 *
 * Contracts for an implementation:
 * - Paths are absolute (the tools resolve them against the session's cwd first).
 * - Every method honours `signal` (rejects or ends promptly once it fires).
 * - A failure rejects with an Error whose message is safe to show the model (no credentials, no peer payloads).
 * - `runCommand` runs `command` with `bash -c` in `cwd`, kills it at `timeoutMs` or when `signal` fires, and keeps at
 *   most `outputByteLimit` bytes of combined output (the end, when more was written).
 */
export interface CommandRun {
  /** The tool call this command belongs to (a door may show its terminal with the call). */
  callId: string;
  command: string;
  cwd: string;
  timeoutMs: number;
  outputByteLimit: number;
  signal: AbortSignal;
}

export interface CommandOutcome {
  output: string;
  /** How it ended: exited (with a code, or killed by a signal), timed out, or cancelled. */
  end: { kind: "exit"; code: number | null; signal: string | null } | { kind: "timeout" } | { kind: "cancelled" };
}

export interface Workspace {
  readTextFile?(path: string, signal: AbortSignal): Promise<string>;
  writeTextFile?(path: string, content: string, signal: AbortSignal): Promise<void>;
  runCommand?(run: CommandRun): Promise<CommandOutcome>;
}
