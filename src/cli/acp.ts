/**
 * `berth acp`: Berth as an Agent Client Protocol (v1) agent over stdio, for editors (Zed, JetBrains, Neovim
 * plugins, `acpx`). The composition root: state root, stdout reserved for ACP frames (every stray writer goes to
 * stderr), the ACP SDK loaded only here.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable } from "node:stream";
import type { Agent } from "../runtime/agent.js";
import type { TurnRunner } from "../runtime/session/index.js";
import { noteTerminalStdin, reserveStdout, signalExitStatus, stdoutSettled } from "./process-io.js";
import { containCrashes } from "./crash-containment.js";

const HELP = `usage: berth acp

Serves the Agent Client Protocol (v1) over stdin/stdout for an editor that spawns it
(Zed: "agent_servers", acpx: --agent "berth acp"). Logs go to stderr.
Configure with MC_HOME and settings.json, like every other Berth command.
`;

/** Opens a URL with the platform's opener, detached; failures only matter to the user, who also sees it on stderr. */
function openUrl(url: string): void {
  const cmd = process.platform === "darwin" ? "open" : process.platform === "win32" ? "explorer" : "xdg-open";
  try {
    const child = spawn(cmd, [url], { stdio: "ignore", detached: true });
    child.on("error", () => undefined);
    child.unref();
  } catch {
    // the URL is on stderr
  }
}

/** The agent, loaded on the first turn: `initialize` and session listing do not pay for providers and tools. */
function lazyAgent(load: () => Promise<Agent>): TurnRunner {
  let agent: Promise<Agent> | null = null;
  return {
    runTurn: (req) => (agent ??= load()).then((a) => a.runTurn(req)),
    // A session's MCP servers start at its first turn (opening one does not load the agent); closing stops them.
    closeSession: (id) => (agent === null ? Promise.resolve() : agent.then((a) => a.closeSession(id))),
    close: () => (agent === null ? Promise.resolve() : agent.then((a) => a.close())),
  };
}

export async function runAcp(argv: string[]): Promise<number> {
  if (argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h")) {
    process.stdout.write(HELP);
    return 0;
  }
  if (argv.length > 0) {
    process.stderr.write(`berth acp: takes no arguments\n${HELP}`);
    return 2;
  }
  const stdout = reserveStdout();
  // A bug outside every handler is logged (stderr) and contained: it must not end the editor's sessions and turns.
  containCrashes((m) => void process.stderr.write(`berth acp: ${m}\n`));
  const { home, problem } = (await import("../store/state-root.js")).prepareHome(process.env);
  if (problem !== null) {
    process.stderr.write(`berth acp: ${problem}\n`);
    return 1;
  }
  noteTerminalStdin("berth acp", "Agent Client Protocol messages from an editor");
  const { serveAcp } = await import("../protocols/acp/server.js");
  // An editor closing stops its agent with SIGTERM (or SIGHUP with a terminal): the shutdown of EOF, so running
  // turns are cancelled, their tool process groups killed and their terminal records written, not left behind by a
  // default signal death. A second signal while that runs exits at once.
  let signalled: NodeJS.Signals | null = null;
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  // An editor that closed its end of stdout (gone, or `| head -1`): writes fail with EPIPE, which the stream also
  // emits as an error event; without a listener that would kill the process with a stack trace. It ends like EOF.
  process.stdout.on("error", () => stop());
  const onSignal = (sig: NodeJS.Signals): void => {
    if (signalled !== null) process.exit(signalExitStatus(sig));
    signalled = sig;
    stop();
  };
  const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
  for (const sig of signals) process.on(sig, onSignal);
  const served = await serveAcp({
    stop: stopped,
    input: Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
    output: new WritableStream<Uint8Array>({
      write: (chunk) => new Promise<void>((resolve, reject) => void stdout.write(chunk, (err) => (err ? reject(err) : resolve()))),
    }),
    deps: {
      home,
      cwd: process.cwd(),
      env: process.env,
      version: (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version,
      log: (line) => void process.stderr.write(line + "\n"),
      openUrl: process.env["BERTH_ACP_NO_BROWSER"] === "1" ? () => undefined : openUrl,
      runner: lazyAgent(() => import("../runtime/agent.js").then((m) => new m.Agent({ home, cwd: process.cwd(), env: process.env }))),
    },
  });
  for (const sig of signals) process.off(sig, onSignal);
  // The editor may still hold stdin open: nothing more is read, the process ends here.
  if (signalled !== null) process.exit(signalExitStatus(signalled));
  // Every turn has ended and its records are written. A write the editor does not read (stdout held open, unread)
  // would keep the process alive for ever: once stdout makes no progress for the grace period (the same for every stdio
  // door: process-io.ts), exit without it. An editor that reads (`printf … | berth acp | cat`) gets every answer.
  // The wait at EOF for the answers may already have spent that grace on a write still pending: not twice.
  if (served.outputStalled && stdout.writableLength > 0) process.exit(0);
  if (!(await stdoutSettled(stdout))) process.exit(0);
  return 0;
}
