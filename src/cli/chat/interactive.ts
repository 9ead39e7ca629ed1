/**
 * Interactive `berth chat` over node:readline, as a client of SCV v3 (see link.ts for the transport).
 * Contract:
 * - Lines are handled one at a time, in order; a prompt line runs one turn and the next line waits for its terminal
 *   (type-ahead is kept). The session is opened at the first prompt (or by /resume, --session, --continue).
 * - Tool calls show as cards: name and short arguments when proposed, then `done`, `failed (<kind>)` or
 *   `cancelled`. A call that asks for approval shows what it will do (a diff for write/edit, the command and cwd
 *   for bash, server/tool/arguments for MCP tools) and the next line answers it: y(es), n(o) or a(lways: this tool,
 *   for the rest of this chat; remembered by the client only). `--yolo` (or `approval_policy: "never"`) approves
 *   everything and says so in the banner.
 * - Ctrl-C: cancels the running turn (or login); a second Ctrl-C before it ends exits. When idle, two Ctrl-Cs exit.
 * - /login, /logout and /model use the app-service (sign-in, catalog and settings live there), started on first use.
 * - Failures print one plain line naming the cause; the loop continues unless the server itself stopped.
 */
import { join } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { Writable } from "node:stream";
import type { RunningTurn } from "../../client/scv/client.js";
import { approvalCard, type ApprovalInfo } from "./approval.js";
import { describeError, failureLine, promptTooLarge } from "./common.js";
import { HISTORY_MAX, loadHistory, saveHistory } from "./history.js";
import { openLink, type Link } from "./link.js";
import { LiveAnswer } from "./live.js";
import { MarkdownStream } from "./markdown.js";
import { preflight } from "./preflight.js";
import { describeServers, projectMcp, trustProject, type McpDef } from "./project.js";
import { gauge, HELP, NO_PROVIDER_HELP, style, type Style } from "./render.js";
import { ServiceCommands } from "./service-commands.js";
import { SessionCommands } from "./session-commands.js";
import { Spinner, turnEvents, type OpenSession } from "./turn-events.js";
import { textOf } from "../../core/json-text.js";

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
  private readonly sc: SessionCommands;
  private rl!: Interface;
  private link: Link | null = null;
  private linking: Promise<Link> | null = null;
  private session: OpenSession | null = null;
  private running: RunningTurn | null = null;
  private cancelling = false;
  private readonly cmds: ServiceCommands;
  private idleInterrupt = false;
  private atLineStart = true;
  private promptShown = false;
  private redraws = false;
  private ctx: { current: number; max: number } | null = null;
  private queue: Promise<void> = Promise.resolve();
  private done: ((code: number) => void) | null = null;
  private exiting = false;
  private yolo: boolean;
  /** Tools approved for the rest of this chat ("always"). */
  private readonly always = new Set<string>();
  /** The pending approval question: the next line answers it. */
  private approval: ((answer: string) => void) | null = null;
  private readonly cwd = process.cwd();
  private baseUrl: string | null = null;
  private failedTurns = 0;
  /** The session's MCP servers when the trusted project adds its own (global ∪ project); null: the settings'. */
  private sessionMcp: Record<string, McpDef> | null = null;
  /** The MCP servers this chat's sessions use (for /tools and /mcp). */
  private mcpConfig: Record<string, McpDef> = {};
  /** Color on (a TTY without NO_COLOR). */
  private readonly color: boolean;
  /** Lines typed so far of a `\`-continued prompt. */
  private continued = "";
  private pasting = false;
  /** While a turn streams, readline's echo goes nowhere so type-ahead never lands inside the answer. */
  private realOutput: NodeJS.WritableStream | null = null;
  /** Lines submitted while muted (echoed when they run). */
  private readonly typedAhead = new Set<string>();
  /** The working indicator is drawn on the last line (cleared before any output). */
  private readonly spinner = new Spinner();

  constructor(private readonly o: InteractiveOptions) {
    this.color = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
    this.s = style(this.color);
    this.sc = new SessionCommands(o.home, {
      s: this.s,
      cwd: this.cwd,
      line: (t) => this.line(t),
      status: (t) => this.status(t),
      session: () => this.session,
      mcpConfig: () => this.mcpConfig,
      yolo: () => this.yolo,
      exiting: () => this.exiting,
      promptIfIdle: () => {
        if (this.running === null && this.approval === null) this.prompt();
      },
      dropLink: () => this.dropLink(),
      ensureSession: (id) => this.ensureSession(id),
    });
    this.cmds = new ServiceCommands({
      s: this.s,
      status: (t) => this.status(t),
      line: (t) => this.line(t),
      error: (e) => this.error(e),
      promptIfIdle: () => {
        if (this.running === null) this.prompt();
      },
      modelChanged: (m) => {
        if (this.session !== null) this.session.model = m;
      },
    });
    this.yolo = o.yolo;
  }

  private write(text: string): void {
    if (text.length === 0) return;
    this.spinner.clear();
    if (this.promptShown) {
      this.promptShown = false;
      process.stdout.write(this.redraws ? "\r\x1b[2K" : "\n");
    }
    process.stdout.write(text);
    this.atLineStart = text.endsWith("\n");
  }

  private line(text: string): void {
    if (!this.atLineStart) this.write("\n");
    this.write(text + "\n");
  }

  private status(text: string): void {
    this.line(this.s.dim(`  · ${text}`));
  }

  private error(err: unknown): void {
    this.line(this.s.red(`error: ${describeError(err)}`));
  }

  async run(): Promise<number> {
    const terminal = process.stdin.isTTY === true && process.stdout.isTTY === true;
    const history = terminal ? await loadHistory(this.o.home) : [];
    this.rl = createInterface({ input: process.stdin, output: process.stdout, terminal, prompt: "› ", history, historySize: HISTORY_MAX, removeHistoryDuplicates: true });
    // A sign-in's pasted redirect URL or code (a secret) and approval answers never enter the history.
    if (terminal)
      this.rl.on("history", (h: string[]) => {
        if (this.cmds.login !== null || this.approval !== null || this.pasting || h[0]?.endsWith("\\") === true) return void h.shift();
        // A `\`-continued prompt is remembered whole.
        if (this.continued !== "" && h[0] !== undefined) h[0] = this.continued + h[0];
        void saveHistory(this.o.home, h);
      });
    this.redraws = terminal && process.env.TERM !== "dumb";
    const code = new Promise<number>((resolve) => (this.done = resolve));
    let prompts = 0;
    this.rl.on("line", (l) => {
      this.promptShown = false;
      const answer = this.approval;
      if (answer !== null) {
        this.approval = null;
        return answer(l.trim().toLowerCase());
      }
      // Lines inside a bracketed paste, and a line ending in `\`, continue the prompt on the next line.
      if (this.pasting) {
        this.continued += l + "\n";
        return;
      }
      if (l.endsWith("\\")) {
        this.continued += l.slice(0, -1) + "\n";
        this.rl.setPrompt("… ");
        this.rl.prompt(true);
        return;
      }
      const full = this.continued + l;
      this.continued = "";
      this.rl.setPrompt("› ");
      if (full.trim() !== "") prompts++;
      if (this.realOutput !== null) this.typedAhead.add(full);
      this.enqueue(() => this.onLine(full));
    });
    if (terminal) {
      // Bracketed paste: a multi-line paste becomes one prompt (sent with the next Enter after it).
      process.stdout.write("\x1b[?2004h");
      process.stdin.on("keypress", (_s: unknown, key: { name?: string } | undefined) => {
        if (key?.name === "paste-start") this.pasting = true;
        else if (key?.name === "paste-end") this.pasting = false;
      });
    }
    this.rl.on("SIGINT", () => this.interrupt());
    const onSignal = (): void => this.interrupt();
    if (!terminal) process.on("SIGINT", onSignal);
    this.rl.on("close", () => {
      // Piped stdin that ended: finish the queued prompts first; never exit 0 having done nothing.
      this.enqueue(() => {
        if (!terminal && prompts === 0) {
          process.stderr.write("berth chat: stdin ended without a prompt (pipe lines to run them as prompts, or use -p PROMPT)\n");
          return this.finish(2);
        }
        // A pipe's exit status tells whether every prompt's turn completed.
        this.finish(!terminal && this.failedTurns > 0 ? 1 : 0);
      });
    });
    this.linking = openLink(process.env);
    this.linking.catch(() => undefined);
    this.enqueue(async () => {
      await this.banner();
      void this.sc.reportFailedMcp();
      if (this.o.sessionId !== null) await this.sc.resume(this.o.sessionId);
      else if (this.o.continueLatest) {
        const id = await this.sc.view.latestIn(this.cwd);
        if (id === null) this.status("no earlier session in this directory; starting a new one");
        else await this.sc.resume(id);
      }
    });
    const c = await code;
    process.off("SIGINT", onSignal);
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
    if (this.exiting || this.promptShown) return;
    this.rl.prompt(true);
    this.promptShown = true;
  }

  private finish(code: number): void {
    if (this.exiting) return;
    this.exiting = true;
    if (process.stdin.isTTY === true && process.stdout.isTTY === true) process.stdout.write("\x1b[?2004l");
    this.rl.close();
    const done = this.done;
    const link = this.link ?? null;
    void Promise.all([link?.close(), this.linking?.then((l) => l.close()).catch(() => undefined), this.cmds.close()]).then(() => done?.(code));
  }

  private interrupt(): void {
    if (this.approval !== null) {
      const a = this.approval;
      this.approval = null;
      a("n");
    }
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
    this.line(this.s.dim("(Ctrl-C again or /exit to quit)"));
    this.prompt();
  }

  private async banner(): Promise<void> {
    const pre = await preflight(process.env, this.cwd);
    if (pre.ok && pre.approvalPolicy === "never") this.yolo = true;
    if (pre.ok) this.baseUrl = pre.baseUrl;
    const via = await this.linking!.then((l) => l.via).catch(() => null);
    this.line(this.s.bold("berth chat") + this.s.dim(` — /help for commands, Ctrl-C to cancel${via === "daemon" ? " · via berth daemon" : ""}`));
    if (pre.ok) this.status(`model ${pre.provider}/${pre.model ?? "?"} · ${this.cwd}`);
    if (this.yolo) this.line(this.s.red("--yolo: every tool call is approved without asking"));
    if (!pre.ok) this.line(pre.noProvider ? NO_PROVIDER_HELP.trimEnd() : this.s.red(`error: ${pre.message}`));
    if (pre.ok) this.mcpConfig = pre.layers.global.mcp_servers ?? {};
    const proj = await projectMcp(this.o.home, this.cwd);
    if (proj === null) return;
    let trusted = proj.trusted;
    if (!trusted) {
      this.line(`This project (${join(this.cwd, ".berth", "settings.json")}) declares MCP servers:`);
      for (const l of describeServers(proj.servers)) this.line(l);
      this.write(this.s.bold("Trust this project and start them (remembered)? [y/N] › "));
      trusted = await new Promise<boolean>((resolve) => {
        this.approval = (answer) => {
          this.atLineStart = true;
          resolve(answer === "y" || answer === "yes");
        };
      });
      if (trusted) await trustProject(this.o.home, this.cwd, proj.fingerprint).catch(() => undefined);
      this.status(trusted ? "project trusted; its MCP servers start with the session" : "project MCP servers not started (asked again next time)");
    }
    if (trusted) this.sessionMcp = { ...((pre.ok ? pre.layers.global.mcp_servers : undefined) ?? {}), ...proj.servers };
    if (this.sessionMcp !== null) this.mcpConfig = this.sessionMcp;
  }

  /** The current connection (reopened after /new or /resume closed the last one). */
  private async ensureLink(): Promise<Link> {
    if (this.link !== null) return this.link;
    this.linking ??= openLink(process.env);
    const l = await this.linking;
    this.linking = null;
    this.link = l;
    void l.closed.then(() => {
      if (this.exiting || this.link !== l) return;
      this.link = null;
      this.session = null;
      this.line(this.s.red(`The Berth server stopped${l.stderrTail() !== "" ? `: ${l.stderrTail().trim().split("\n").at(-1)!.slice(0, 200)}` : ""}.`));
      this.finish(1);
    });
    return l;
  }

  /** Drops the connection (its session ends with it) and starts opening a fresh one in the background. */
  private async dropLink(): Promise<void> {
    const l = this.link;
    this.link = null;
    this.session = null;
    this.ctx = null;
    if (l === null && this.linking !== null) return; // a fresh connection (no session yet) is already on its way
    await l?.close();
    this.linking = openLink(process.env);
    this.linking.catch(() => undefined);
  }

  private async ensureSession(resume?: string): Promise<OpenSession> {
    if (this.session !== null && resume === undefined) return this.session;
    const l = await this.ensureLink();
    const ev = await l.client.openSession({
      cwd: this.cwd,
      auto_approve: this.yolo,
      ...(resume !== undefined ? { resume } : {}),
      ...(this.sessionMcp !== null ? { mcp_servers: this.sessionMcp } : {}),
    });
    const s: OpenSession = {
      id: String(ev["session_id"]),
      cwd: textOf(ev["cwd"], this.cwd),
      model: typeof ev["model"] === "string" ? ev["model"] : null,
      ctxMax: typeof ev["context_max_tokens"] === "number" ? ev["context_max_tokens"] : null,
    };
    this.session = s;
    return s;
  }

  private async onLine(raw: string): Promise<void> {
    this.idleInterrupt = false;
    if (this.typedAhead.delete(raw)) this.line(`› ${raw}`);
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
    const [cmd = "", ...args] = text.split(/\s+/);
    switch (cmd) {
      case "/help":
        return this.write(HELP);
      case "/exit":
      case "/quit":
        return this.finish(0);
      case "/new":
        await this.dropLink();
        return this.status("new conversation");
      case "/sessions":
        return this.sc.sessions();
      case "/resume":
        if (args[0] === undefined) return this.status("usage: /resume <n|id-prefix> (see /sessions)");
        return this.sc.resume(args[0]);
      case "/tools":
      case "/mcp":
        return this.sc.tools(cmd === "/mcp");
      case "/model":
        return this.cmds.model(args);
      case "/login":
        return this.cmds.startLogin(args[0] ?? "openai-codex");
      case "/logout":
        return this.cmds.logout(args[0]);
      default:
        this.status(`unknown command ${cmd.slice(0, 32)}; /help lists commands`);
    }
  }

  /** Stops readline's echo (keystrokes are still read: Ctrl-C works, typed text is kept for the next prompt). */
  private mute(): void {
    if (!this.redraws || this.realOutput !== null) return;
    const rl = this.rl as unknown as { output: NodeJS.WritableStream };
    this.realOutput = rl.output;
    rl.output = new Writable({ write: (_c, _e, cb) => cb() });
  }

  private unmute(): void {
    if (this.realOutput === null) return;
    (this.rl as unknown as { output: NodeJS.WritableStream }).output = this.realOutput;
    this.realOutput = null;
  }

  private ask(info: ApprovalInfo): Promise<boolean> {
    return approvalCard(info).then((card) => {
      for (const l of card.split("\n")) this.line(l.startsWith("+") && !l.startsWith("+++") ? this.s.green(l) : l.startsWith("-") && !l.startsWith("---") ? this.s.red(l) : l);
      this.unmute();
      this.write(this.s.bold("Allow? [y]es / [n]o / [a]lways for this session › "));
      return new Promise<boolean>((resolve) => {
        this.approval = (answer) => {
          this.atLineStart = true;
          this.mute();
          if (answer === "a" || answer === "always") {
            this.always.add(info.name);
            this.status(`approved; ${info.name} is approved for the rest of this session`);
            return resolve(true);
          }
          const yes = answer === "y" || answer === "yes";
          this.status(yes ? "approved" : "denied");
          resolve(yes);
        };
      });
    });
  }

  private async turn(prompt: string): Promise<void> {
    const tooLarge = promptTooLarge(prompt);
    if (tooLarge !== null) {
      this.failedTurns++;
      return this.line(this.s.red(`error: ${tooLarge}`));
    }
    const s = await this.ensureSession();
    const client = this.link!.client;
    this.cancelling = false;
    // Markdown is rendered line by line on a terminal that can redraw; the unfinished line shows raw meanwhile.
    const answer = new LiveAnswer(this.redraws ? new MarkdownStream(this.color) : null, {
      write: (t) => this.write(t),
      control: (t) => {
        process.stdout.write(t);
        this.atLineStart = true;
      },
    });
    const endMessage = (): void => answer.end();
    // After a resize the shown unfinished line may have re-wrapped: it stays, and the rendered line follows below.
    const onResize = (): void => answer.resized();
    const started = Date.now();
    process.stdout.on("resize", onResize);
    if (this.redraws) {
      this.spinner.start((frame) => {
        if (!this.atLineStart || this.promptShown || this.approval !== null || this.running === null) return null;
        const secs = Math.floor((Date.now() - started) / 1000);
        return this.s.dim(`${frame} working ${secs}s · ~${Math.round(answer.chars / 4)} tokens · Ctrl-C to cancel`);
      });
    }
    const onEvent = turnEvents(
      {
        write: (t) => this.write(t),
        line: (t) => this.line(t),
        status: (t) => this.status(t),
        atLineStart: () => this.atLineStart,
        bold: (t) => this.s.bold(t),
        autoApproves: (name) => this.yolo || this.always.has(name),
        ask: (info) => this.ask(info),
        resolveApproval: (id, yes) => client.resolveApproval(s.id, id, yes),
        context: (current, max) => (this.ctx = { current, max }),
      },
      s,
      answer,
    );
    const turn = client.startTurn(s.id, prompt, onEvent);
    this.mute();
    this.running = turn;
    try {
      const end = await turn.done;
      endMessage();
      if (end.type === "error") {
        this.failedTurns++;
        return this.line(this.s.red(`error: the server refused the prompt (${String(end["code"])}: ${textOf(end["message"])})`));
      }
      const g = `${this.ctx !== null ? ` · ${gauge(this.ctx.current, this.ctx.max)}` : ""} · ${s.model ?? "?"} · ${s.cwd} · ${s.id.slice(0, 12)}`;
      const label = end.type === "turn.completed" ? "completed" : failureLine(end, this.baseUrl);
      if (end.type !== "turn.completed") this.failedTurns++;
      this.line(this.s.dim(`── ${end.type === "turn.failed" ? this.s.red(label) : label}${g}`));
      if (end.type === "turn.failed") {
        const pre = await preflight(process.env, this.cwd);
        if (!pre.ok) this.line(pre.noProvider ? NO_PROVIDER_HELP.trimEnd() : this.s.red(`error: ${pre.message}`));
      }
    } finally {
      this.spinner.stop();
      process.stdout.off("resize", onResize);
      this.unmute();
      this.running = null;
      this.cancelling = false;
      if (this.approval !== null) {
        this.approval = null;
        this.atLineStart = true;
      }
    }
  }
}
