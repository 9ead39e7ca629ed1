/**
 * `berth chat`: the terminal coding agent, a client of the SCV protocol (a running `berth daemon`'s socket, else a
 * `berth stdio` child). `berth chat` is interactive; `berth chat -p PROMPT` runs one turn.
 * Piped input: `-p -` reads the prompt from stdin; `cmd | berth chat -p PROMPT` appends stdin to the prompt; piped
 * stdin without `-p` runs each line as a prompt (a non-terminal session).
 */
import { existsSync, fstatSync, readFileSync, statSync } from "node:fs";
import { prepareHome } from "../../store/state-root.js";
import { parseArgs, USAGE } from "./args.js";
import { promptTooLarge } from "./common.js";
import * as link from "./link.js";
import { mark } from "../../runtime/debug-timing.js";
import { berthVersion } from "../version.js";

/**
 * Whether stdin is a terminal (never read with -p). A pipe, a socket, a file or /dev/null (a script's, a service's or
 * a bench's stdin) answers from one fstat: node:tty and its binding load (~1 ms before the first token) only for
 * another character device, which isatty() then decides.
 */
async function stdinIsTerminal(): Promise<boolean> {
  try {
    const st = fstatSync(0);
    if (!st.isCharacterDevice()) return false;
    if (st.rdev === statSync("/dev/null").rdev) return false;
  } catch {
    // no descriptor 0, or no /dev/null: isatty() decides
  }
  const { isatty } = await import("node:tty");
  return isatty(0);
}

async function readStdin(): Promise<string> {
  // A file or /dev/null (a script's or a service's stdin) is read at once: a stream would cost ~3 ms of set-up
  // before the first token. A pipe or socket is streamed, so the in-process server loads while its writer works.
  try {
    const st = fstatSync(0);
    if (st.isFile() || st.isCharacterDevice()) return readFileSync(0, "utf8");
  } catch {
    // not readable at once (EAGAIN on a non-blocking descriptor): streamed below
  }
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * A closed stdout (`berth chat -p … | head -1`) ends the process quietly instead of with a stack trace. A running
 * one-shot registers `stop` to end its turn first (its server runs in this process and records the turn's end).
 */
const epipe: { stop: (() => void) | null } = { stop: null };
function quietEpipe(): void {
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code !== "EPIPE") return;
    if (epipe.stop !== null) epipe.stop();
    else process.exit(0);
  });
}

export async function runChat(argv: string[]): Promise<number> {
  // First: `--help` or `--version` into a closed pipe ends as quietly as an answer does.
  quietEpipe();
  const a = parseArgs(argv);
  if ("help" in a) {
    process.stdout.write(USAGE);
    return 0;
  }
  if ("version" in a) {
    process.stdout.write(`berth ${berthVersion()}\n`);
    return 0;
  }
  if ("error" in a) {
    process.stderr.write(`berth chat: ${a.error}\n`);
    return 2;
  }
  mark("chat.start");
  // -p without a daemon runs the SCV server in this process: start loading it now, so it loads while the chat's
  // own modules and checks run (an existing socket means a daemon is probably up and will serve instead).
  const noDaemon = a.prompt !== null && (process.env["BERTH_CHAT_NO_DAEMON"] === "1" || !existsSync(link.scvSocketPath(process.env)));
  if (noDaemon) link.loadInProcessServer().catch(() => undefined);
  const { home, problem } = prepareHome(process.env);
  if (problem !== null) {
    process.stderr.write(`berth chat: ${problem}\n`);
    return 1;
  }
  if (a.prompt !== null) {
    // Connected (or the server built) while stdin is read and the checks run; only after the state root passed.
    // No socket file: no daemon to try (connecting to a missing path would only fail a moment later).
    const linking = link.openLink(process.env, { inProcess: true, noDaemon });
    linking.catch(() => undefined);
    const drop = async (): Promise<void> => void (await linking.catch(() => null))?.close();
    let prompt = a.prompt;
    if (prompt === "-") {
      // Typed by hand, `-p -` would otherwise wait in silence for an end of input the user may not know to give.
      if (await stdinIsTerminal()) process.stderr.write("berth chat: reading the prompt from the terminal: type it, then press Ctrl-D on an empty line to send it (or give it after -p)\n");
      prompt = await readStdin();
    }
    // Not process.stdin.isTTY: creating process.stdin (a stream and its module) costs ~3 ms before the first token,
    // and a terminal's stdin is never read with -p.
    else if (!(await stdinIsTerminal())) {
      const piped = await readStdin();
      if (piped.trim() !== "") prompt = `${prompt}\n\n${piped}`;
    }
    if (prompt.trim().length === 0) {
      process.stderr.write(
        a.prompt === "-"
          ? 'berth chat: the prompt is empty (stdin had no text): pipe the prompt in (echo "what to do" | berth chat -p -), or give it after -p\n'
          : 'berth chat: the prompt is empty: give it after -p (berth chat -p "what to do"), or pipe it in with -p -\n',
      );
      await drop();
      return 2;
    }
    const tooLarge = promptTooLarge(prompt);
    if (tooLarge !== null) {
      process.stderr.write(`berth chat: ${tooLarge}\n`);
      await drop();
      return 1;
    }
    mark("chat.prompt_read");
    const { runOneShot } = await import("./oneshot.js");
    return runOneShot({ prompt, json: a.json, sessionId: a.sessionId, continueLatest: a.continueLatest, yolo: a.yolo, home, linking, onStdoutClosed: (stop) => void (epipe.stop = stop) });
  }
  const { runInteractive } = await import("./interactive.js");
  return runInteractive({ sessionId: a.sessionId, continueLatest: a.continueLatest, yolo: a.yolo, home });
}
