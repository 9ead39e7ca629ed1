/**
 * Entry points for `bin/berth` and `bin/magi-code`.
 * Each subcommand module is loaded lazily so `berth service` pays only for what it uses at startup.
 */
const USAGE = `usage: berth <command>

commands:
  chat [-p PROMPT] [--json]   terminal client (interactive, or one-shot with -p)
  service                     app-service v1: JSONL over stdio for frontend apps
  stdio                       SCV client protocol v3 over stdin/stdout (one session)
  daemon [--listen HOST:PORT] live-backend host (backend Unix socket + AHP WebSocket) and the SCV socket
  channel login|logout|set|status   WeChat and Feishu/Lark chat accounts
  build-info                  print {"version", "commit"} as JSON
`;

export async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
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
      process.stdout.write(USAGE);
      return;
    default:
      process.stderr.write(cmd === undefined ? USAGE : `berth: unknown command '${cmd}'\n${USAGE}`);
      process.exitCode = 2;
  }
}

/** `magi-code --app service` is the only accepted form; everything else is refused before any I/O. */
export async function magiCode(argv: string[]): Promise<void> {
  const m = await import("./service.js");
  process.exitCode = await m.runMagiCode(argv);
}
