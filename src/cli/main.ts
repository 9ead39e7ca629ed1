/**
 * Entry points for `bin/berth` and `bin/magi-code`.
 * Each subcommand module is loaded lazily so `berth service` pays only for what it uses at startup.
 */
import { pinHomeVars } from "../store/home.js";
import { nearest } from "./did-you-mean.js";
const USAGE = `usage: berth <command> [--help] | berth --version

commands:
  chat [-p PROMPT] [--json]   terminal client (interactive, or one-shot with -p)
  service                     app-service v1: JSONL over stdio for frontend apps
  stdio                       SCV client protocol v3 over stdin/stdout (one session)
  daemon [--listen HOST:PORT] live-backend host (backend Unix socket + AHP WebSocket + web UI) and the SCV socket
  open [--no-browser]         start or find the daemon and open its web UI in the browser
  acp                         Agent Client Protocol v1 over stdio (for editors: Zed, acpx, ...)
  channel login|logout|set|status   WeChat and Feishu/Lark chat accounts
  build-info                  print {"version", "commit"} as JSON
`;

/** `berth <command> --help` for commands whose own parser takes no options (they would refuse it). */
const COMMAND_HELP: Record<string, string> = {
  service: `usage: berth service
Serves app-service v1 (JSON lines) on stdin/stdout for one frontend app; exits when stdin ends.
Configure with MC_HOME (default ~/.berth), MC_PROVIDER, MC_MODEL and $MC_HOME/settings.json.
`,
  stdio: `usage: berth stdio
Serves the SCV client protocol v3 (JSON lines) on stdin/stdout: one connection, one session; exits when stdin ends.
Configure with MC_HOME (default ~/.berth), MC_PROVIDER, MC_MODEL and $MC_HOME/settings.json.
`,
  "build-info": `usage: berth build-info
Prints {"version", "commit"} as one JSON line: the package version and the short Git commit of this checkout
(null without Git metadata).
`,
};

/** Commands that work in the directory they were started in (their sessions' default, its project settings). */
const USES_CWD = new Set(["service", "stdio", "daemon", "acp", "open", "chat"]);

/**
 * False, after saying so on stderr, when the directory this process was started in no longer exists (removed or
 * renamed while a shell was in it): `process.cwd()` then throws ENOENT, which surfaced as a stack trace or
 * "unexpected error". Node caches the answer, so the commands' own `process.cwd()` costs nothing more.
 */
function cwdUsable(name: string): boolean {
  try {
    process.cwd();
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no longer exists (it was removed or renamed)" : `cannot be read${typeof code === "string" && /^E[A-Z]{1,15}$/.test(code) ? ` (${code})` : ""}`;
    process.stderr.write(`${name}: the current directory ${why}; cd to an existing directory and run it again\n`);
    process.exitCode = 1;
    return false;
  }
}

const COMMANDS = ["chat", "service", "stdio", "daemon", "open", "acp", "channel", "build-info"];

/** ` (did you mean 'chat'?)` for a command one or two edits (a transposition counts as one) from a known one. */
function didYouMean(typed: string): string {
  const near = nearest(typed, COMMANDS);
  return near !== null ? ` (did you mean '${near}'?)` : "";
}

/**
 * Writes help or version text to stdout. A reader that is already gone (`berth --help | head -0`, a closed pipe) ends
 * the process quietly with 0 instead of an unhandled EPIPE and its stack trace: the text had nowhere to go.
 */
function printOut(text: string): void {
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  });
  process.stdout.write(text);
}

export async function main(argv: string[]): Promise<void> {
  if (process.env["BERTH_HANDOFF_FD"] !== undefined) (await import("./handoff.js")).adoptCredentialHandoff();
  // Before anything reads them or starts a process: a relative home means the directory Berth was started in.
  pinHomeVars(process.env, () => process.cwd());
  const [cmd, ...rest] = argv;
  // `--version` works after every command; `--help` for commands that take no options.
  if (cmd === "--version" || cmd === "-V" || (cmd !== undefined && rest.length === 1 && (rest[0] === "--version" || rest[0] === "-V"))) {
    const { berthVersion } = await import("./version.js");
    printOut(`berth ${berthVersion()}\n`);
    return;
  }
  if (cmd !== undefined && rest.length === 1 && (rest[0] === "--help" || rest[0] === "-h")) {
    if (COMMAND_HELP[cmd] !== undefined) return printOut(COMMAND_HELP[cmd]);
    if (cmd === "channel") return printOut((await import("./channel.js")).USAGE);
  }
  if (cmd !== undefined && USES_CWD.has(cmd) && !cwdUsable(`berth ${cmd}`)) return;
  switch (cmd) {
    case "service": {
      const m = await import("./service.js");
      process.exitCode = await m.runServiceCommand(rest);
      return;
    }
    case "stdio": {
      const m = await import("./stdio.js");
      process.exitCode = await m.runStdio(rest);
      return;
    }
    case "daemon": {
      const m = await import("./daemon.js");
      process.exitCode = await m.runDaemon(rest);
      return;
    }
    case "channel": {
      const m = await import("./channel.js");
      process.exitCode = await m.runChannel(rest);
      return;
    }
    case "acp": {
      const m = await import("./acp.js");
      process.exitCode = await m.runAcp(rest);
      return;
    }
    case "open": {
      const m = await import("./open.js");
      process.exitCode = await m.runOpen(rest);
      return;
    }
    case "build-info": {
      const m = await import("./build-info.js");
      process.exitCode = m.runBuildInfo(rest);
      return;
    }
    case "chat": {
      const m = await import("./chat/index.js");
      process.exitCode = await m.runChat(rest);
      return;
    }
    case "-h":
    case "--help":
    case "help":
      printOut(USAGE);
      return;
    case undefined:
    default:
      process.stderr.write(cmd === undefined ? USAGE : `berth: unknown command '${cmd}'${didYouMean(cmd)}\n${USAGE}`);
      process.exitCode = 2;
  }
}

/** `magi-code --app service` is the only accepted form; everything else is refused before any I/O. */
export async function magiCode(argv: string[]): Promise<void> {
  if (process.env["BERTH_HANDOFF_FD"] !== undefined) (await import("./handoff.js")).adoptCredentialHandoff();
  pinHomeVars(process.env, () => process.cwd());
  if (!cwdUsable("magi-code")) return;
  const m = await import("./service.js");
  process.exitCode = await m.runMagiCode(argv);
}
