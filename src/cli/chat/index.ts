/**
 * `berth chat`: the terminal client over the app-service client library (`src/client/app-service`).
 * `berth chat` is interactive; `berth chat -p PROMPT [--json] [--session ID]` runs one turn.
 */
const USAGE = `usage: berth chat [-p PROMPT [--json]] [--session ID]
  -p, --prompt PROMPT   run one turn and print the final answer (exit 1 if it fails, 130 if cancelled)
  --json                with -p: print the turn's events as JSON lines
  -s, --session ID      continue a saved session
`;

interface Args {
  prompt: string | null;
  json: boolean;
  sessionId: string | null;
}

function parse(argv: string[]): Args | string {
  const a: Args = { prompt: null, json: false, sessionId: null };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i]!;
    const next = (): string | null => (i + 1 < argv.length ? argv[++i]! : null);
    if (v === "-p" || v === "--prompt") {
      a.prompt = next();
      if (a.prompt === null) return "-p needs a prompt";
    } else if (v.startsWith("--prompt=")) a.prompt = v.slice(9);
    else if (v === "--json") a.json = true;
    else if (v === "-s" || v === "--session") {
      a.sessionId = next();
      if (a.sessionId === null) return "--session needs an ID";
    } else if (v === "-h" || v === "--help") return "";
    else return `unknown argument '${v.slice(0, 40)}'`;
  }
  if (a.json && a.prompt === null) return "--json needs -p";
  if (a.prompt !== null && a.prompt.trim().length === 0) return "the prompt is empty";
  return a;
}

export async function runChat(argv: string[]): Promise<number> {
  const a = parse(argv);
  if (typeof a === "string") {
    if (a === "") {
      process.stdout.write(USAGE);
      return 0;
    }
    process.stderr.write(`berth chat: ${a}\n${USAGE}`);
    return 2;
  }
  const [{ resolveHome }, { prepareStateRoot }] = await Promise.all([import("../../store/home.js"), import("../../store/state-root.js")]);
  const problem = prepareStateRoot(resolveHome(process.env));
  if (problem !== null) {
    process.stderr.write(`berth chat: ${problem}\n`);
    return 1;
  }
  if (a.prompt !== null) {
    const { runOneShot } = await import("./oneshot.js");
    return runOneShot({ prompt: a.prompt, json: a.json, sessionId: a.sessionId });
  }
  const { runInteractive } = await import("./interactive.js");
  return runInteractive({ sessionId: a.sessionId });
}
