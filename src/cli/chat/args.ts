/**
 * `berth chat`'s command line.
 * Contract: `parseArgs` returns the options, or a refusal: one line naming what was wrong and the fix, ending with
 * where the options are listed (`HELP_POINTER`); nothing is started for a refusal. The flags users of other terminal
 * agents type (Claude Code's `--resume`/`-r`/`--model`/`--print`, Codex's `resume`) are answered with Berth's way,
 * not aliased: `--resume` without an ID means a picker there, which `berth chat` does not have. A mistyped flag names
 * the nearest known one (did-you-mean.ts). Typed text is quoted back cut to 40 characters and without controls (a
 * pasted prompt, or a key, is never echoed whole).
 */
import { nearest } from "../did-you-mean.js";
import { terminalSafe } from "../terminal-safe.js";

export const USAGE = `usage: berth chat [-p PROMPT|- [--json]] [--session ID | --continue] [--yolo]
  -p, --prompt PROMPT   run one turn and print the final answer (exit 1 if it fails, 130 if cancelled);
                        "-" reads the prompt from stdin; piped stdin is appended to PROMPT
  --json                with -p: print the turn's events as JSON lines
  -s, --session ID      continue a saved session (a full ID or a unique prefix)
  -c, --continue        continue the latest session started in this directory
  --yolo                approve every tool call without asking (stated in the banner)
  --version             print the version
Without -p, piped stdin runs each line as a prompt. The model: MC_PROVIDER / MC_MODEL, or /model in the chat.
`;

export const HELP_POINTER = "berth chat --help lists the options";

export interface Args {
  prompt: string | null;
  json: boolean;
  sessionId: string | null;
  continueLatest: boolean;
  yolo: boolean;
}

/** What `parseArgs` answers besides options: the usage (`help`), the version, or a refusal (`error`, one line). */
export type ArgsOutcome = Args | { help: true } | { version: true } | { error: string };

const KNOWN = ["--prompt", "--json", "--session", "--continue", "--yolo", "--version", "--help", "-p", "-s", "-c", "-h", "-V"];

const RESUME = "continue a saved session with --session <id> (a full ID or a unique prefix; /sessions in the chat lists them), or the latest one in this directory with --continue";

/** Other agents' flags and Berth's way to the same thing. */
const FOREIGN: Record<string, { way: string }> = {
  "--resume": { way: RESUME },
  "-r": { way: RESUME },
  resume: { way: RESUME },
  "--model": { way: "choose the model with MC_MODEL=<model> (and MC_PROVIDER=<provider>) or /model in the chat" },
  "-m": { way: "choose the model with MC_MODEL=<model> (and MC_PROVIDER=<provider>) or /model in the chat" },
  "--print": { way: "run one turn with -p PROMPT (--prompt PROMPT)" },
  "--dangerously-skip-permissions": { way: "--yolo approves every tool call without asking" },
  "--output-format": { way: "-p PROMPT --json prints the turn's events as JSON lines" },
};

/** Typed text as quoted back: at most 40 characters, no terminal controls. */
function shown(s: string): string {
  const cut = s.length > 40 ? `${s.slice(0, 40)}…` : s;
  return terminalSafe(cut, false);
}

const refuse = (why: string): { error: string } => ({ error: `${why}; ${HELP_POINTER}` });

export function parseArgs(argv: string[]): ArgsOutcome {
  const r = parse(argv);
  // `--help` anywhere wins over a refusal: whoever typed it wants the options.
  return "error" in r && argv.some((x) => x === "--help" || x === "-h") ? { help: true } : r;
}

function parse(argv: string[]): ArgsOutcome {
  const a: Args = { prompt: null, json: false, sessionId: null, continueLatest: false, yolo: false };
  let help = false;
  let version = false;
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i]!;
    const next = (): string | null => (i + 1 < argv.length ? argv[++i]! : null);
    const setPrompt = (p: string): { error: string } | null => {
      if (a.prompt !== null) return refuse("-p was given twice: give one prompt (quote it when it has several words)");
      a.prompt = p;
      return null;
    };
    if (v === "-p" || v === "--prompt") {
      const p = next();
      if (p === null) return refuse("-p needs a prompt (or - to read it from stdin)");
      const twice = setPrompt(p);
      if (twice !== null) return twice;
    } else if (v.startsWith("--prompt=")) {
      const twice = setPrompt(v.slice(9));
      if (twice !== null) return twice;
    } else if (v === "--json") a.json = true;
    else if (v === "--yolo") a.yolo = true;
    else if (v === "-c" || v === "--continue") a.continueLatest = true;
    else if (v === "-s" || v === "--session") {
      a.sessionId = next();
      if (a.sessionId === null) return refuse("--session needs an ID");
    } else if (v === "-h" || v === "--help") help = true;
    else if (v === "--version" || v === "-V") version = true;
    else return unknown(v, argv, i, a);
  }
  if (help) return { help: true };
  if (version) return { version: true };
  if (a.json && a.prompt === null) return refuse("--json needs -p");
  if (a.sessionId !== null && a.continueLatest) return refuse("--session and --continue cannot be combined");
  return a;
}

/** The refusal for an argument that is not one of berth chat's. */
function unknown(v: string, argv: string[], i: number, a: Args): { error: string } {
  const name = v.includes("=") && v.startsWith("-") ? v.slice(0, v.indexOf("=")) : v;
  // Codex's `resume` is a word, and only as the first argument; the others are flags anywhere.
  const foreign = name === "resume" ? (i === 0 ? FOREIGN[name] : undefined) : FOREIGN[name];
  if (foreign !== undefined) return refuse(`'${shown(name)}' is not a berth chat option: ${foreign.way}`);
  if (v.startsWith("-") && v !== "-") {
    const near = nearest(name, KNOWN, (w) => w.replace(/^-+/, "").length);
    return refuse(`unknown option '${shown(v)}'${near !== null ? ` (did you mean ${near}?)` : ""}`);
  }
  // A word where no option takes one: the rest of an unquoted prompt, or a prompt given without -p.
  const prev = argv[i - 1];
  if (a.prompt !== null && a.prompt !== "-" && (prev === a.prompt || prev === `--prompt=${a.prompt}`)) {
    const words = [a.prompt, ...argv.slice(i).filter((w) => !w.startsWith("-"))].join(" ");
    return refuse(`-p takes one argument, and '${shown(v)}' followed it: quote a prompt of several words ("berth chat -p '${shown(words)}'")`);
  }
  return refuse(`'${shown(v)}' is not an option: berth chat takes a prompt with -p ("berth chat -p '${shown(v)}'"); without -p, start it and type the prompt`);
}
