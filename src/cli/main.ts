/**
 * Entry points for `bin/berth` and `bin/magi-code`.
 * Each subcommand module is loaded lazily so `berth service` pays only for what it uses at startup.
 */
const USAGE = `usage: berth <command>

commands:
  chat [-p PROMPT] [--json]   terminal client (interactive, or one-shot with -p)
  service                     app-service v1: JSONL over stdio for frontend apps
  daemon [--listen HOST:PORT] live-backend host (backend Unix socket + AHP WebSocket + web UI)
  open [--no-browser]         start or find the daemon and open its web UI in the browser
`;

export async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case "service": {
      const m = await import("./service.js");
      process.exitCode = await m.runServiceCommand(rest);
      return;
    }
    case "daemon": {
      const m = await import("./daemon.js");
      process.exitCode = await m.runDaemon(rest);
      return;
    }
    case "open": {
      const m = await import("./open.js");
      process.exitCode = await m.runOpen(rest);
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
