/**
 * Interactive `berth chat` over node:readline, as a client of SCV v3 (connection.ts; the transport is link.ts).
 * Contract:
 * - Lines are handled one at a time, in order; a prompt line runs one turn (chat-turn.ts) and the next line waits for
 *   its terminal (type-ahead is kept). The session is opened at the first prompt (or by /resume, --session,
 *   --continue).
 * - A prompt spans several lines with Shift-Enter (keys.ts lists the forms understood), a line ending in `\`, or a
 *   bracketed paste; Enter sends it.
 * - On a terminal, the screen (screen.ts) keeps a footer (model, cwd, context gauge, session) on the last row and
 *   redraws the whole transcript when the terminal is resized.
 * - Tool calls that ask for approval are answered by the next line: y(es), n(o) or a(lways: this tool, for the rest
 *   of this chat; remembered by the client only). `--yolo` (or `approval_policy: "never"`) approves everything.
 * - Ctrl-C: cancels the running turn (or login); a second Ctrl-C before it ends exits. When idle, two Ctrl-Cs exit.
 * - SIGTERM / SIGHUP: cancel the running turn, restore the terminal and exit 143 / 129. Ctrl-Z: suspend.ts.
 * - End of input (Ctrl-D, a pipe that ended) answers a pending question, and every later one, "no" (`denied (input
 *   ended)`): nothing can answer it any more. The queued prompts finish, then the chat exits.
 * - /login, /logout and /model use the app-service (sign-in, catalog and settings live there), started on first use.
 * - Failures print one plain line naming the cause; the loop continues. Piped prompts (stdin not a terminal) stop
 *   instead at a broken setup (said once on stderr, exit 1, none run) and at a failure every later prompt would meet
 *   alike (hints.ts `failsAlike`): the rest are not run.
 * - Slash commands: slash-commands.ts.
 * - When the server stops (a daemon killed or stopped, a `berth stdio` child that died), the chat connects again
 *   (to the daemon if one answers, else to a new `berth stdio` child) and resumes the conversation there: its
 *   history, an interrupted answer's partial text included, is on disk; without the daemon, the line says so and names
 *   the model now used when it differs (reconnected.ts). After `MAX_RECONNECTS` losses in a row with
 *   no completed turn between them, or when it cannot connect, it exits (status 1) saying how to resume.
 */
import { createInterface, type Interface } from "node:readline";
import type { RunningTurn } from "../../client/scv/client.js";
import { banner, type Startup } from "./banner.js";
import { runTurn, type TurnEnd } from "./chat-turn.js";
import { describeError } from "./common.js";
import { Connection } from "./connection.js";
import { failsAlike } from "./hints.js";
import { HISTORY_MAX, loadHistory, saveHistory } from "./history.js";
import { isShiftEnter, keyInput, PROMPT, PromptLines, type KeyInput } from "./keys.js";
import { footerLine, style, type Style } from "./render.js";
import { Screen } from "./screen.js";
import { ServiceCommands } from "./service-commands.js";
import { SessionCommands } from "./session-commands.js";
import { named, reconnected } from "./reconnected.js";
import { runSlash } from "./slash-commands.js";
import { suspendToShell } from "./suspend.js";
import { terminalSafe } from "../terminal-safe.js";

/** Server losses in a row (no completed turn between them) the chat reconnects after; the next one ends it. */
export const MAX_RECONNECTS = 3;

export interface InteractiveOptions {
  sessionId: string | null;
  continueLatest: boolean;
  yolo: boolean;
  home: string;
}

export async function runInteractive(o: InteractiveOptions): Promise<number> {
  return new Chat(o).run();
}

class Chat {
  private readonly s: Style;
  private readonly color: boolean;
  private readonly terminal = process.stdin.isTTY === true && process.stdout.isTTY === true;
  private readonly screen: Screen;
  private readonly conn: Connection;
  private readonly sc: SessionCommands;
  private readonly cmds: ServiceCommands;
  private rl!: Interface;
  private keys: KeyInput | null = null;
  private running: RunningTurn | null = null;
  private cancelling = false;
  private idleInterrupt = false;
  private queue: Promise<void> = Promise.resolve();
  private done: ((code: number) => void) | null = null;
  private exiting = false;
  private yolo: boolean;
  /** Tools approved for the rest of this chat ("always"). */
  private readonly always = new Set<string>();
  /** The pending question (approval, project trust): the next line answers it. */
  private approval: ((answer: string) => void) | null = null;
  /** The text of the last question asked (shown again after a suspension). */
  private asked = "";
  /** stdin ended: no line will answer a question. */
  private inputEnded = false;
  private readonly cwd = process.cwd();
  /** What the banner found (model, base URL, MCP servers, the user's selection), once it ran. */
  private start: Startup | null = null;
  private failedTurns = 0;
  /** Server losses since the last completed turn. */
  private losses = 0;
  /** The multi-line prompt being typed. */
  private readonly lines = new PromptLines();
  /** Lines submitted while muted (echoed when they run). */
  private readonly typedAhead = new Set<string>();

  constructor(private readonly o: InteractiveOptions) {
    this.color = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
    this.s = style(this.color);
    this.screen = new Screen(process.stdout, this.terminal && process.env.TERM !== "dumb");
    this.yolo = o.yolo;
    this.conn = new Connection(
      {
        cwd: this.cwd,
        autoApprove: () => this.yolo,
        mcpServers: () => this.start?.sessionMcp ?? null,
        chosen: () => this.start?.chosen ?? null,
        opened: (session, client) => void this.sc.reportFailedMcp(session, client),
      },
      (detail, lost) => {
        if (this.exiting) return;
        this.screen.line(this.s.red(terminalSafe(`The Berth server stopped${detail !== "" ? `: ${detail}` : ""}.`, false)));
        this.refreshFooter();
        // After the turn it interrupted (if any) has ended.
        this.enqueue(() => this.reconnect(lost));
      },
    );
    this.sc = new SessionCommands(o.home, {
      s: this.s,
      cwd: this.cwd,
      line: (t) => this.screen.line(t),
      status: (t) => this.status(t),
      session: () => this.conn.session,
      mcpConfig: () => this.start?.mcpConfig ?? {},
      yolo: () => this.yolo,
      exiting: () => this.exiting,
      promptIfIdle: () => {
        if (this.running === null && this.approval === null) this.prompt();
      },
      dropLink: () => this.newConversation(),
      ensureSession: async (id) => {
        const s = await this.conn.open(id);
        this.refreshFooter();
        return s;
      },
      liveSession: async () => {
        const session = await this.conn.open();
        this.refreshFooter();
        return { session, client: (await this.conn.current()).client };
      },
    });
    this.cmds = new ServiceCommands({
      s: this.s,
      status: (t) => this.status(t),
      line: (t) => this.screen.line(t),
      error: (e) => this.error(e),
      promptIfIdle: () => {
        if (this.running === null) this.prompt();
      },
      modelChanged: (m) => {
        if (this.conn.session !== null) this.conn.session.model = m;
        this.refreshFooter();
      },
    });
  }

  private status(text: string): void {
    this.screen.line(this.s.dim(`  · ${text}`));
  }

  private error(err: unknown): void {
    // A server's refusal can quote what it refused (a session ID, a path).
    this.screen.line(this.s.red(terminalSafe(`error: ${describeError(err)}`, false)));
  }

  private footerText(): (cols: number) => string {
    const s = this.conn.session;
    // A directory's name (a cloned or unpacked tree) and a server's model name may hold terminal controls.
    const model = s?.model ?? this.start?.model ?? null;
    const f = { model: model === null ? null : terminalSafe(model, false), cwd: terminalSafe(s?.cwd ?? this.cwd, false), ctx: this.conn.ctx, ctxMax: s?.ctxMax ?? null, session: s?.id ?? null };
    return (cols) => this.s.dim(footerLine(f, cols));
  }

  private refreshFooter(): void {
    this.screen.setFooter(this.footerText());
  }

  async run(): Promise<number> {
    const terminal = this.terminal;
    const history = terminal ? await loadHistory(this.o.home) : [];
    this.keys = terminal ? keyInput(process.stdin) : null;
    const input = this.keys?.input ?? process.stdin;
    this.rl = createInterface({ input, output: this.screen.rlOutput, terminal, prompt: PROMPT, history, historySize: HISTORY_MAX, removeHistoryDuplicates: true });
    // A sign-in's pasted redirect URL or code (a secret) and approval answers never enter the history.
    if (terminal)
      this.rl.on("history", (h: string[]) => {
        if (this.cmds.login !== null || this.approval !== null || this.lines.partial(h[0])) return void h.shift();
        // A multi-line prompt is remembered whole.
        if (this.lines.continued !== "" && h[0] !== undefined) h[0] = this.lines.continued + h[0];
        void saveHistory(this.o.home, h);
      });
    const code = new Promise<number>((resolve) => (this.done = resolve));
    let prompts = 0;
    this.rl.on("line", (l) => {
      const echoed = terminal && !this.screen.muted;
      this.screen.promptShown = false;
      const answer = this.approval;
      if (answer !== null) {
        if (echoed) this.screen.record(l + "\n");
        this.approval = null;
        return answer(l.trim().toLowerCase());
      }
      // Lines after the first of a paste are echoed without a prompt.
      if (echoed) this.screen.record((this.lines.pasting && this.lines.continued !== "" ? "" : this.lines.prompt) + l + "\n");
      const full = this.lines.push(l);
      this.rl.setPrompt(this.lines.prompt);
      if (full === null) {
        if (this.lines.pasting) return;
        this.rl.prompt(true);
        this.screen.promptShown = echoed;
        return;
      }
      if (full.trim() !== "") prompts++;
      if (this.screen.muted) this.typedAhead.add(full);
      this.enqueue(() => this.onLine(full));
    });
    if (this.keys !== null) {
      const keys = this.keys.input;
      // Bracketed paste: a multi-line paste becomes one prompt (sent with the next Enter after it).
      process.stdout.write("\x1b[?2004h");
      keys.on("keypress", (_s: unknown, key: { name?: string; meta?: boolean } | undefined) => {
        if (key?.name === "paste-start") this.lines.pasting = true;
        else if (key?.name === "paste-end") this.lines.pasting = false;
        else if (isShiftEnter(key) && !this.lines.pasting && this.approval === null) {
          // readline ignores Meta-Enter (keys.ts folds Shift-Enter into it): end this line as a continued one.
          this.lines.softBreak = true;
          this.rl.write(null, { name: "end" });
          this.rl.write(null, { name: "return" });
        }
      });
    }
    this.screen.onRedrawn = (hadPrompt) => {
      if (this.exiting) return;
      if (this.approval !== null) return this.screen.transient(this.rl.line);
      if (!hadPrompt) return;
      // readline would move up over the rows its line had before the screen was cleared.
      (this.rl as unknown as { prevRows: number }).prevRows = 0;
      this.prompt();
    };
    this.rl.on("SIGINT", () => this.interrupt());
    this.rl.on("SIGTSTP", () => this.suspend());
    const onSignal = (): void => this.interrupt();
    if (!terminal) process.on("SIGINT", onSignal);
    // Without a listener SIGTERM and SIGHUP kill the process where it stands: raw mode (after SIGHUP), the footer's
    // scroll region and bracketed paste were left in the terminal, and the turn was not cancelled by the chat.
    const onStop = (signal: NodeJS.Signals): void => this.stopBySignal(signal === "SIGHUP" ? 129 : 143);
    process.on("SIGTERM", onStop);
    process.on("SIGHUP", onStop);
    this.rl.on("close", () => {
      this.inputEnded = true;
      if (this.approval !== null) {
        this.screen.write(this.s.dim(" (input ended)\n"));
        this.answerNo();
      }
      // Piped stdin that ended: finish the queued prompts first; never exit 0 having done nothing.
      this.enqueue(() => {
        if (this.exiting) return; // already ending (a broken setup, a signal): its own line said why
        if (!terminal && prompts === 0) {
          process.stderr.write("berth chat: stdin ended without a prompt (pipe lines to run them as prompts, or use -p PROMPT)\n");
          return this.finish(2);
        }
        // A pipe's exit status tells whether every prompt's turn completed.
        this.finish(!terminal && this.failedTurns > 0 ? 1 : 0);
      });
    });
    this.enqueue(async () => {
      this.screen.startFooter(this.footerText());
      const start = await banner({
        screen: this.screen,
        s: this.s,
        home: this.o.home,
        cwd: this.cwd,
        yolo: this.yolo,
        piped: !terminal,
        via: () => this.conn.via(),
        daemonSelection: () => this.conn.daemonSelection(),
        note: () => this.conn.note(),
        question: (t) => this.question(t),
      });
      // Piped prompts with a broken setup: said once, as -p says it, and none is run.
      if (start.setupError !== null && !terminal) {
        process.stderr.write(`berth chat: ${start.setupError}berth chat: no prompt was run\n`);
        return this.finish(1);
      }
      this.yolo = start.yolo;
      this.start = start;
      this.refreshFooter();
      if (this.o.sessionId !== null) {
        // Piped prompts meant for that session must not run in a new one (as with -p).
        const failed = await this.sc.resume(this.o.sessionId, !terminal);
        if (failed !== null && !terminal) {
          process.stderr.write(`berth chat: ${failed}; no prompt was run\n`);
          return this.finish(1);
        }
      }
      else if (this.o.continueLatest) {
        const id = await this.sc.view.latestIn(this.cwd);
        if (id === null) this.status("no earlier session in this directory; starting a new one");
        else await this.sc.resume(id);
      }
    });
    const c = await code;
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onStop);
    process.off("SIGHUP", onStop);
    return c;
  }

  private enqueue(task: () => Promise<void> | void): void {
    this.queue = this.queue
      .then(task)
      .catch((err: unknown) => this.error(err))
      .then(() => {
        if (this.running === null) this.prompt();
      });
  }

  private prompt(): void {
    if (this.exiting || this.screen.promptShown) return;
    this.rl.prompt(true);
    this.screen.promptShown = true;
  }

  /** Writes a question; the next line typed answers it (trimmed, lower case; "n" when Ctrl-C cancels it). */
  private question(text: string): Promise<string> {
    this.asked = text;
    this.screen.muted = false;
    this.screen.write(this.s.bold(text));
    if (this.inputEnded) {
      this.screen.write(this.s.dim(" (input ended)\n"));
      return Promise.resolve("n");
    }
    return new Promise<string>((resolve) => {
      this.approval = (answer) => {
        this.screen.atLineStart = true;
        // A turn that is still running gets its type-ahead muting back.
        this.screen.muted = this.running !== null && this.screen.redraws;
        resolve(answer);
      };
    });
  }

  private finish(code: number): void {
    if (this.exiting) return;
    this.exiting = true;
    this.screen.stop();
    if (this.keys !== null) process.stdout.write("\x1b[?2004l");
    this.rl.close();
    this.keys?.close();
    const done = this.done;
    void Promise.all([this.conn.close(), this.cmds.close()]).then(() => done?.(code));
  }

  /** Ctrl-Z: gives the terminal back to the shell and stops this process; `fg` takes it back where it was. */
  private suspend(): void {
    if (this.keys === null || this.exiting) return;
    suspendToShell(this.screen, this.keys.input, () => {
      if (this.exiting) return;
      if (this.approval !== null) this.screen.write(this.s.bold(this.asked));
      else if (this.running !== null) this.screen.live?.();
      else {
        // readline would move up over the rows its line had before the shell printed below it.
        (this.rl as unknown as { prevRows: number }).prevRows = 0;
        this.prompt();
      }
    });
  }

  /** Answers the pending question "n" (Ctrl-C, or no input left to answer it). */
  private answerNo(): void {
    const a = this.approval;
    if (a === null) return;
    this.approval = null;
    a("n");
  }

  /**
   * SIGTERM or SIGHUP: cancels the running turn (the session keeps its partial answer), gives the terminal back and
   * exits with `code`; a second one while the connection closes exits at once (the terminal is already restored).
   */
  private stopBySignal(code: number): void {
    if (this.exiting) process.exit(code);
    this.answerNo();
    this.running?.cancel();
    this.finish(code);
  }

  private interrupt(): void {
    this.answerNo();
    if (this.running !== null) {
      if (this.cancelling) return this.finish(130);
      this.cancelling = true;
      this.status("cancelling (Ctrl-C again to exit)");
      this.running.cancel();
      return;
    }
    if (this.cmds.login !== null) {
      this.status("cancelling sign-in");
      void this.cmds.login.cancel().catch(() => {});
      return;
    }
    if (this.idleInterrupt) return this.finish(0);
    this.idleInterrupt = true;
    this.screen.line(this.s.dim("(Ctrl-C again or /exit to quit)"));
    this.prompt();
  }

  /** Connects again after the server stopped (`lost`: how it was connected) and resumes its open session, if any. */
  private async reconnect(was: { via: string; session: string | null; model: string | null }): Promise<void> {
    if (this.exiting) return;
    const lost = was.session;
    const resumeHint = lost !== null ? `; \`berth chat --session ${lost}\` continues this conversation` : "";
    if (++this.losses > MAX_RECONNECTS) {
      this.screen.line(this.s.red(`The server stopped ${this.losses} times in a row; not connecting again. Start berth chat again${resumeHint}.`));
      return this.finish(1);
    }
    this.status("connecting again…");
    let via: string;
    try {
      via = await this.conn.reconnect(lost);
    } catch (e) {
      this.error(e);
      this.screen.line(this.s.red(`Cannot connect again. Start berth chat again${resumeHint}.`));
      return this.finish(1);
    }
    const r = reconnected({ via, was, runs: this.start?.runs ?? null, own: this.start?.own ?? null, model: this.conn.session?.model ?? null });
    if (this.start !== null && r.now !== null) [this.start.runs, this.start.model] = [r.now, named(r.now)];
    this.refreshFooter();
    this.status(r.line);
  }

  /** Ends the conversation: the next prompt starts a new session. */
  private async newConversation(): Promise<void> {
    await this.conn.drop();
    this.refreshFooter();
  }

  private async onLine(raw: string): Promise<void> {
    if (this.exiting) return;
    this.idleInterrupt = false;
    if (this.typedAhead.delete(raw)) this.screen.line(`› ${raw}`);
    const text = raw.trim();
    if (text.length === 0) return;
    if (!text.startsWith("/") || text.includes("\n")) {
      const login = this.cmds.login;
      if (login !== null) {
        await login.submit(text);
        if (this.cmds.login === login && !this.cmds.loginChecking) this.status("submitted; waiting for confirmation");
        return;
      }
      return this.turn(text);
    }
    const host = { write: (t: string) => this.screen.write(t), status: (t: string) => this.status(t), finish: (c: number) => this.finish(c), newConversation: () => this.newConversation() };
    return runSlash({ ...host, sc: this.sc, cmds: this.cmds }, text);
  }

  private async turn(prompt: string): Promise<void> {
    this.cancelling = false;
    let ok = false;
    try {
      const end = await this.runOne(prompt);
      ok = end.completed;
      // Piped prompts: a failure every later one would meet alike is said once (above); the rest are not run.
      if (!this.terminal && end.failure !== null && failsAlike(end.failure)) {
        process.stderr.write("berth chat: stopped: every later prompt would fail alike (see above), so the remaining piped prompts were not run\n");
        this.finish(1);
      }
    } finally {
      if (!ok) this.failedTurns++;
      else this.losses = 0;
    }
  }

  private runOne(prompt: string): Promise<TurnEnd> {
    return runTurn(
      {
        screen: this.screen,
        s: this.s,
        color: this.color,
        conn: this.conn,
        cwd: this.cwd,
        baseUrl: () => this.start?.baseUrl ?? null,
        autoApproves: (name) => this.yolo || this.always.has(name),
        approveAlways: (name) => this.always.add(name),
        question: (t) => this.question(t),
        asking: () => this.approval !== null,
        dropQuestion: () => {
          this.approval = null;
          this.screen.atLineStart = true;
        },
        running: (t) => {
          this.running = t;
          if (t === null) this.cancelling = false;
        },
        refreshFooter: () => this.refreshFooter(),
      },
      prompt,
    );
  }
}
