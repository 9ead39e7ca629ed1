/**
 * The workspace of an ACP client that advertised `fs` and/or `terminal`: the file tools read and write through
 * `fs/read_text_file` / `fs/write_text_file` (the editor's buffers, unsaved changes included), and `bash` runs in a
 * client terminal (`terminal/create`, shown with the tool call as `terminal` content, then `wait_for_exit`,
 * `output`, `release`; `kill` on timeout or cancellation). Capabilities the client did not advertise stay local.
 *
 * Contracts: errors from the client become a fixed message naming the method (the client's text is not passed on);
 * the terminal is always released.
 */
import type { AgentContext, ClientCapabilities, ToolCallContent } from "@agentclientprotocol/sdk";
import type { CommandOutcome, CommandRun, Workspace } from "../../runtime/workspace.js";

export interface ClientWorkspaceHooks {
  /** Shows a terminal with its tool call. */
  showTerminal(callId: string, content: ToolCallContent): void;
}

export function clientWorkspace(client: AgentContext, sessionId: string, caps: ClientCapabilities, hooks: ClientWorkspaceHooks): Workspace | undefined {
  const ws: Workspace = {};
  if (caps.fs?.readTextFile === true) {
    ws.readTextFile = async (path, signal) => {
      try {
        return (await client.request("fs/read_text_file", { sessionId, path }, { cancellationSignal: signal })).content;
      } catch {
        throw new Error(`the editor could not read ${path}`);
      }
    };
  }
  if (caps.fs?.writeTextFile === true) {
    ws.writeTextFile = async (path, content, signal) => {
      try {
        await client.request("fs/write_text_file", { sessionId, path, content }, { cancellationSignal: signal });
      } catch {
        throw new Error(`the editor could not write ${path}`);
      }
    };
  }
  if (caps.terminal === true) ws.runCommand = (run) => runInTerminal(client, sessionId, run, hooks);
  return Object.keys(ws).length > 0 ? ws : undefined;
}

async function runInTerminal(client: AgentContext, sessionId: string, run: CommandRun, hooks: ClientWorkspaceHooks): Promise<CommandOutcome> {
  let terminalId: string;
  try {
    ({ terminalId } = await client.request("terminal/create", {
      sessionId,
      command: "bash",
      args: ["-c", run.command],
      cwd: run.cwd,
      outputByteLimit: run.outputByteLimit,
    }));
  } catch {
    throw new Error("the editor could not start a terminal for this command");
  }
  hooks.showTerminal(run.callId, { type: "terminal", terminalId });
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    const stopped = new Promise<"timeout" | "cancelled">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), run.timeoutMs);
      onAbort = () => resolve("cancelled");
      if (run.signal.aborted) resolve("cancelled");
      else run.signal.addEventListener("abort", onAbort, { once: true });
    });
    const exited = client.request("terminal/wait_for_exit", { sessionId, terminalId });
    const first = await Promise.race([exited.then((r) => ({ exit: r })), stopped]);
    if (typeof first === "string") {
      exited.catch(() => undefined);
      await client.request("terminal/kill", { sessionId, terminalId }).catch(() => undefined);
    }
    const out = await client.request("terminal/output", { sessionId, terminalId });
    const end: CommandOutcome["end"] =
      typeof first === "string" ? { kind: first } : { kind: "exit", code: first.exit.exitCode ?? null, signal: first.exit.signal ?? null };
    return { output: out.output, end };
  } catch {
    throw new Error("the editor's terminal failed while running this command");
  } finally {
    clearTimeout(timer);
    if (onAbort) run.signal.removeEventListener("abort", onAbort);
    await client.request("terminal/release", { sessionId, terminalId }).catch(() => undefined);
  }
}
