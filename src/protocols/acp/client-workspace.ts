/**
 * The workspace of an ACP client that advertised `fs` and/or `terminal`: the file tools read and write through
 * `fs/read_text_file` / `fs/write_text_file` (the editor's buffers, unsaved changes included), and `bash` runs in a
 * client terminal (`terminal/create`, shown with the tool call as `terminal` content, then `wait_for_exit`,
 * `output`, `release`; `kill` on timeout or cancellation). Capabilities the client did not advertise stay local.
 *
 * Contracts: errors from the client become a fixed message naming the method (the client's text is not passed on);
 * the terminal is always released. Berth never waits on the editor past a cancellation: a cancelled file request is
 * withdrawn (`$/cancel_request`) and no longer waited for; a cancelled command sends `terminal/kill` and
 * `terminal/release` without waiting for their answers or for its output (the model is told the output was not
 * read); a terminal the editor creates after the command was cancelled is released when its ID arrives. So a
 * `session/cancel` ends the turn even when the editor never answers.
 * - Nothing the editor leaves unanswered piles up: a `terminal/wait_for_exit` or `terminal/output` Berth stops waiting
 *   for is withdrawn (`$/cancel_request`), and the kills, releases and late-created terminals no turn waits for are
 *   bounded per connection (`unawaited.ts`).
 */
import type { AgentContext, ClientCapabilities, ToolCallContent } from "@agentclientprotocol/sdk";
import type { CommandOutcome, CommandRun, Workspace } from "../../runtime/workspace.js";
import type { Unawaited } from "./unawaited.js";

export interface ClientWorkspaceHooks {
  /** Shows a terminal with its tool call. */
  showTerminal(callId: string, content: ToolCallContent): void;
}

export function clientWorkspace(client: AgentContext, sessionId: string, caps: ClientCapabilities, hooks: ClientWorkspaceHooks, unawaited: Unawaited): Workspace | undefined {
  const ws: Workspace = {};
  if (caps.fs?.readTextFile === true) {
    ws.readTextFile = async (path, signal) => {
      try {
        return (await client.request("fs/read_text_file", { sessionId, path }, { cancellationSignal: signal, stopWaitingOnCancel: true })).content;
      } catch {
        throw new Error(`the editor could not read ${path}`);
      }
    };
  }
  if (caps.fs?.writeTextFile === true) {
    ws.writeTextFile = async (path, content, signal) => {
      try {
        await client.request("fs/write_text_file", { sessionId, path, content }, { cancellationSignal: signal, stopWaitingOnCancel: true });
      } catch {
        throw new Error(`the editor could not write ${path}`);
      }
    };
  }
  if (caps.terminal === true) ws.runCommand = (run) => runInTerminal(client, sessionId, run, hooks, unawaited);
  return Object.keys(ws).length > 0 ? ws : undefined;
}

/** A cancelled command's output: Berth does not wait for the editor to send it. */
export const OUTPUT_NOT_READ = "(output not read: the command was cancelled)";

const noop = (): void => undefined;

async function runInTerminal(client: AgentContext, sessionId: string, run: CommandRun, hooks: ClientWorkspaceHooks, unawaited: Unawaited): Promise<CommandOutcome> {
  let onAbort = noop;
  const cancelled = new Promise<"cancelled">((resolve) => {
    onAbort = () => resolve("cancelled");
    if (run.signal.aborted) onAbort();
    else run.signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await inTerminal(client, sessionId, run, hooks, cancelled, unawaited);
  } finally {
    run.signal.removeEventListener("abort", onAbort);
  }
}

async function inTerminal(
  client: AgentContext,
  sessionId: string,
  run: CommandRun,
  hooks: ClientWorkspaceHooks,
  cancelled: Promise<"cancelled">,
  unawaited: Unawaited,
): Promise<CommandOutcome> {
  /** A request no turn waits for (bounded: see unawaited.ts). */
  const fire = (method: "terminal/kill" | "terminal/release", terminalId: string): Promise<unknown> => {
    const ctl = new AbortController();
    const answer = client.request(method, { sessionId, terminalId }, { cancellationSignal: ctl.signal, stopWaitingOnCancel: true });
    answer.catch(noop);
    unawaited.track(ctl, answer);
    return answer;
  };
  const release = (terminalId: string): void => void fire("terminal/release", terminalId);
  const stoppedEarly: CommandOutcome = { output: OUTPUT_NOT_READ, end: { kind: "cancelled" } };
  let terminalId: string;
  try {
    const creating = new AbortController();
    const created = client.request(
      "terminal/create",
      { sessionId, command: "bash", args: ["-c", run.command], cwd: run.cwd, outputByteLimit: run.outputByteLimit },
      { cancellationSignal: creating.signal, stopWaitingOnCancel: true },
    );
    const first = await Promise.race([created, cancelled]);
    if (first === "cancelled") {
      // A terminal the editor still creates is released as soon as its ID arrives (which also kills its command).
      created.then((r) => release(r.terminalId), noop);
      unawaited.track(creating, created);
      return stoppedEarly;
    }
    ({ terminalId } = first);
  } catch {
    throw new Error("the editor could not start a terminal for this command");
  }
  hooks.showTerminal(run.callId, { type: "terminal", terminalId });
  let timer: NodeJS.Timeout | undefined;
  // Aborted once the command is over: a wait_for_exit or output request still unanswered then is withdrawn.
  const done = new AbortController();
  const awaited = { cancellationSignal: done.signal, stopWaitingOnCancel: true };
  try {
    const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), run.timeoutMs)));
    const exited = client.request("terminal/wait_for_exit", { sessionId, terminalId }, awaited);
    exited.catch(noop);
    const first = await Promise.race([exited.then((r) => ({ exit: r })), timedOut, cancelled]);
    if (first === "cancelled") {
      void fire("terminal/kill", terminalId);
      return stoppedEarly;
    }
    if (first === "timeout") {
      const killed = fire("terminal/kill", terminalId).catch(noop);
      if ((await Promise.race([killed, cancelled])) === "cancelled") return stoppedEarly;
    }
    const out = client.request("terminal/output", { sessionId, terminalId }, awaited);
    const read = await Promise.race([out, cancelled]);
    const end: CommandOutcome["end"] =
      typeof first === "string" ? { kind: first } : { kind: "exit", code: first.exit.exitCode ?? null, signal: first.exit.signal ?? null };
    if (read === "cancelled") {
      out.catch(noop);
      return { output: OUTPUT_NOT_READ, end };
    }
    return { output: read.output, end };
  } catch {
    throw new Error("the editor's terminal failed while running this command");
  } finally {
    clearTimeout(timer);
    done.abort();
    // Not waited for: an editor that never answers it must not hold the turn (or its cancellation) open.
    release(terminalId);
  }
}
