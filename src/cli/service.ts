/**
 * `berth service` and `magi-code --app service`: the composition root of the app-service protocol over stdio.
 * Startup creates the state root (owner-only) and nothing else, and refuses a state root another user owns or may
 * write (store/state-root.ts); every other file is created by the request that needs it.
 */
import { prepareHome } from "../store/state-root.js";
import { AppServiceServer } from "../protocols/app-service/server.js";
import { buildFamilies } from "./service-families.js";
import { noteTerminalStdin, packageVersion, reserveStdout, signalExitStatus } from "./process-io.js";
import { containCrashes } from "./crash-containment.js";

// Kept importable from here for existing callers; new code imports ./process-io.js (it loads no protocol).
export { packageVersion, reserveStdout };

const REFUSED = "magi-code: --app service takes no other arguments (no --prompt, provider, model, credential, theme, session-selection flags or subcommands)\n";

/** `magi-code` accepts exactly `--app service` (or `--app=service`). */
export async function runMagiCode(argv: string[]): Promise<number> {
  const isService = (argv.length === 2 && argv[0] === "--app" && argv[1] === "service") || (argv.length === 1 && argv[0] === "--app=service");
  if (isService) return runService();
  const mentionsService = argv.includes("--app") || argv.some((a) => a.startsWith("--app="));
  process.stderr.write(mentionsService ? REFUSED : "usage: magi-code --app service\n");
  return 2;
}

export async function runServiceCommand(argv: string[]): Promise<number> {
  if (argv.length > 0) {
    process.stderr.write("berth service: takes no arguments (configure with MC_HOME, MC_PROVIDER, MC_MODEL and settings.json)\n");
    return 2;
  }
  return runService();
}

async function runService(): Promise<number> {
  const stdout = reserveStdout();
  // A bug outside every handler is logged (stderr) and contained: it must not end the app's sessions and turns.
  containCrashes((m) => void process.stderr.write(`berth service: ${m}\n`));
  const { home, problem } = prepareHome(process.env);
  if (problem !== null) {
    process.stderr.write(`berth service: ${problem}\n`);
    return 1;
  }
  noteTerminalStdin("berth service", "app-service v1 requests from a frontend app");
  const state = { initialized: false };
  const log = (line: string): void => void process.stderr.write(line + "\n");
  const families = buildFamilies({
    home,
    cwd: process.cwd(),
    env: process.env,
    state,
    info: { serverName: "berth", serverVersion: packageVersion(), transports: ["stdio"] },
    log,
  });
  const server = new AppServiceServer({
    input: process.stdin,
    output: stdout,
    families,
    state,
    log,
    // Env-gated input-state diagnostics, for tests that must observe backpressure and EOF from outside.
    ...(process.env.BERTH_DEBUG_IO === "1" ? { onInput: (e) => void process.stderr.write(`berth-io input-${e.state} records=${e.records}\n`) } : {}),
  });
  // A signal shuts down like EOF (turns cancelled, tool process groups killed, terminals written); a second one
  // while that is under way exits at once.
  let signalled = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (signalled) process.exit(signalExitStatus(sig));
    signalled = true;
    server.requestShutdown();
  };
  const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
  for (const sig of signals) process.on(sig, onSignal);
  let code: number;
  try {
    code = await server.run();
  } finally {
    for (const sig of signals) process.off(sig, onSignal);
  }
  // The server left output nobody reads behind (stdin closed, stdout held open unread: server.ts `outputGraceMs`); its
  // pending write would keep the process alive for ever.
  if (stdout.writableLength > 0) process.exit(code);
  return code;
}
