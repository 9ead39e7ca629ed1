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
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { Writable } from "node:stream";
import type { Login, ModelEntry, ServiceHandle } from "../../client/app-service/index.js";
import type { RunningTurn, ScvEvent } from "../../client/scv/client.js";
import { approvalCard, mcpParts, type ApprovalInfo } from "./approval.js";
import { describeError, failureLine, promptTooLarge, startService } from "./common.js";
import { openLink, type Link } from "./link.js";
import { MarkdownStream, visibleWidth } from "./markdown.js";
import { preflight } from "./preflight.js";
import { describeServers, projectMcp, trustProject, type McpDef } from "./project.js";
import { gauge, HELP, loginEndLine, NO_PROVIDER_HELP, style, type Style } from "./render.js";
import { SessionsView, type SessionRow } from "./sessions.js";

export interface InteractiveOptions {
  sessionId: string | null;
  continueLatest: boolean;
  yolo: boolean;
  home: string;
}

const HISTORY_MAX = 500;
const historyPath = (home: string): string => join(home, "chat-history.jsonl");

/** Input history (newest first, as readline keeps it): one JSON string per line, owner-only. */
async function loadHistory(home: string): Promise<string[]> {
  try {
    const lines = (await readFile(historyPath(home), "utf8")).split("\n").filter((l) => l !== "");
    const out: string[] = [];
    for (const l of lines) {
      try {
        const v: unknown = JSON.parse(l);
        if (typeof v === "string") out.push(v);
      } catch {
        /* a damaged line is skipped; the rest of the history stays */
      }
    }
    return out.slice(0, HISTORY_MAX);
  } catch {
    return [];
  }
}

let saving: Promise<void> = Promise.resolve();
function saveHistory(home: string, h: string[]): Promise<void> {
  const text = h.slice(0, HISTORY_MAX).map((l) => JSON.stringify(l)).join("\n") + "\n";
  saving = saving.then(async () => {
    try {
      await mkdir(home, { recursive: true, mode: 0o700 });
      const tmp = historyPath(home) + ".tmp";
      await writeFile(tmp, text, { mode: 0o600 });
      await rename(tmp, historyPath(home));
    } catch {
      /* history is a convenience: a failed save never interrupts the chat */
    }
  });
  return saving;
}

export async function runInteractive(o: InteractiveOptions): Promise<number> {
  return new Chat(o).run();
}

interface OpenSession {
  id: string;
  cwd: string;
  model: string | null;
  ctxMax: number | null;
}

/** A short one-line view of a tool call's arguments. */
function shortArgs(name: string, args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  const pick = typeof a["command"] === "string" ? a["command"] : typeof a["path"] === "string" ? a["path"] : typeof a["pattern"] === "string" ? a["pattern"] : JSON.stringify(a);
  const mcp = mcpParts(name);
  const label = mcp !== null ? `${mcp.server}/${mcp.tool}` : name;
  const one = String(pick).replace(/\s+/g, " ");
  return `${label} ${one.length > 80 ? one.slice(0, 79) + "…" : one}`;
}

class Chat {
  private readonly s: Style;
  private readonly view: SessionsView;
  private rl!: Interface;
  private link: Link | null = null;
  private linking: Promise<Link> | null = null;
  private session: OpenSession | null = null;
  private running: RunningTurn | null = null;
  private cancelling = false;
  private service: ServiceHandle | null = null;
  private login: Login | null = null;
  private loginChecking = false;
  private idleInterrupt = false;
  private atLineStart = true;
  private promptShown = false;
  private redraws = false;
  private ctx: { current: number; max: number } | null = null;
  private lastListing: SessionRow[] = [];
  private lastModels: ModelEntry[] = [];
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
  private spinnerShown = false;
  private spinTimer: NodeJS.Timeout | null = null;

  constructor(private readonly o: InteractiveOptions) {
    this.color = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
    this.s = style(this.color);
    this.view = new SessionsView(o.home);
    this.yolo = o.yolo;
  }

  private write(text: string): void {
    if (text.length === 0) return;
    if (this.spinnerShown) {
      this.spinnerShown = false;
      process.stdout.write("\r\x1b[2K");
    }
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
        if (this.login !== null || this.approval !== null || this.pasting || h[0]?.endsWith("\\") === true) return void h.shift();
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
      this.enqueue(async () => {
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
      if (this.o.sessionId !== null) await this.resume(this.o.sessionId);
      else if (this.o.continueLatest) {
        const id = await this.view.latestIn(this.cwd);
        if (id === null) this.status("no earlier session in this directory; starting a new one");
        else await this.resume(id);
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
    void Promise.all([link?.close(), this.linking?.then((l) => l.close()).catch(() => undefined), this.service?.close()]).then(() => done?.(code));
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
    if (this.login !== null) {
      this.status("cancelling sign-in");
      void this.login.cancel().catch(() => {});
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
      cwd: String(ev["cwd"] ?? this.cwd),
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
      const login = this.login;
      if (login !== null) {
        await login.submit(text);
        if (this.login === login && !this.loginChecking) this.status("submitted; waiting for confirmation");
        return;
      }
      return this.turn(text);
    }
    const [cmd, ...args] = text.split(/\s+/);
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
        return this.sessions();
      case "/resume":
        if (args[0] === undefined) return this.status("usage: /resume <n|id-prefix> (see /sessions)");
        return this.resume(args[0]);
      case "/model":
        return this.model(args);
      case "/login":
        return this.startLogin(args[0] ?? "openai-codex");
      case "/logout":
        return this.logout(args[0]);
      default:
        this.status(`unknown command ${cmd!.slice(0, 32)}; /help lists commands`);
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
    const args = new Map<string, unknown>();
    const names = new Map<string, string>();
    let live = "";
    let pending: Promise<void> = Promise.resolve();
    // Markdown is rendered line by line on a terminal that can redraw; the unfinished line shows raw meanwhile.
    const md = this.redraws ? new MarkdownStream(this.color) : null;
    let partial = "";
    let shown = 0;
    let outChars = 0;
    const started = Date.now();
    const unshow = (): void => {
      if (shown === 0) return;
      const cols = process.stdout.columns > 0 ? process.stdout.columns : 80;
      const up = Math.floor((shown - 1) / cols);
      process.stdout.write(`\r${up > 0 ? `\x1b[${up}A` : ""}\x1b[J`);
      this.atLineStart = true;
      shown = 0;
    };
    const stream = (text: string): void => {
      outChars += text.length;
      if (md === null) return this.write(text);
      const lines = (partial + text).split("\n");
      partial = lines.pop()!;
      if (lines.length > 0) unshow();
      for (const l of lines) for (const r of md.push(l)) this.write(r + "\n");
      if (partial !== "") {
        unshow();
        this.write(partial);
        shown = visibleWidth(partial);
      }
    };
    const endMessage = (): void => {
      if (md === null) return;
      unshow();
      const rest = partial !== "" ? md.push(partial) : [];
      partial = "";
      for (const r of [...rest, ...md.flush()]) this.write(r + "\n");
    };
    // After a resize the shown unfinished line may have re-wrapped: leave it in place and render the completed line
    // below it rather than erasing rows that are no longer where we think.
    const onResize = (): void => {
      if (shown === 0) return;
      process.stdout.write("\n");
      this.atLineStart = true;
      shown = 0;
    };
    process.stdout.on("resize", onResize);
    if (this.redraws) {
      const frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏";
      let f = 0;
      this.spinTimer = setInterval(() => {
        if (!this.atLineStart || this.promptShown || this.approval !== null || this.running === null) return;
        const secs = Math.floor((Date.now() - started) / 1000);
        process.stdout.write(`\r\x1b[2K${this.s.dim(`${frames[f++ % frames.length]!} working ${secs}s · ~${Math.round(outChars / 4)} tokens · Ctrl-C to cancel`)}`);
        this.spinnerShown = true;
      }, 100);
    }
    const onEvent = (ev: ScvEvent): void => {
      switch (ev.type) {
        case "assistant.delta":
          live += String(ev["content"] ?? "");
          stream(String(ev["content"] ?? ""));
          break;
        case "assistant.completed": {
          const c = typeof ev["content"] === "string" ? ev["content"] : "";
          if (c !== live && c.startsWith(live)) stream(c.slice(live.length));
          live = "";
          endMessage();
          if (!this.atLineStart) this.write("\n");
          break;
        }
        case "tool.proposed":
          endMessage();
          args.set(String(ev["call_id"]), ev["arguments"]);
          names.set(String(ev["call_id"]), String(ev["name"]));
          this.line(this.s.bold(`● ${shortArgs(String(ev["name"]), ev["arguments"])}`));
          break;
        case "approval.requested": {
          const name = String(ev["name"]);
          const id = String(ev["approval_id"]);
          if (this.yolo || this.always.has(name)) {
            client.resolveApproval(s.id, id, true);
            break;
          }
          const info: ApprovalInfo = {
            name,
            arguments: (args.get(String(ev["call_id"])) as Record<string, unknown> | undefined) ?? null,
            cwd: String(ev["cwd"] ?? s.cwd),
            summary: String(ev["summary"] ?? ""),
            risk: String(ev["risk"] ?? ""),
          };
          pending = pending.then(() => this.ask(info)).then((yes) => client.resolveApproval(s.id, id, yes));
          break;
        }
        case "tool.progress":
          this.status(String(ev["text"] ?? "").split("\n").at(-1)!.slice(0, 120));
          break;
        case "tool.completed": {
          const err = typeof ev["error"] === "string" ? ev["error"] : null;
          const label = names.get(String(ev["call_id"])) ?? String(ev["name"]);
          const st = ev["success"] === true ? "done" : err === "cancelled" ? "cancelled" : err === "denied" ? "denied" : `failed (${err ?? "failed"})`;
          this.status(`${label} ${st}`);
          break;
        }
        case "context.compacted":
          this.status(`context compacted: ${String(ev["before_tokens"])} → ${String(ev["after_tokens"])} tokens`);
          break;
        case "turn.completed": {
          const u = ev["usage"] as { input_tokens?: number } | undefined;
          if (u?.input_tokens !== undefined && s.ctxMax !== null) this.ctx = { current: u.input_tokens, max: s.ctxMax };
          break;
        }
        default:
          break;
      }
    };
    const turn = client.startTurn(s.id, prompt, onEvent);
    this.mute();
    this.running = turn;
    try {
      const end = await turn.done;
      endMessage();
      if (end.type === "error") {
        this.failedTurns++;
        return this.line(this.s.red(`error: the server refused the prompt (${String(end["code"])}: ${String(end["message"] ?? "")})`));
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
      if (this.spinTimer !== null) clearInterval(this.spinTimer);
      this.spinTimer = null;
      if (this.spinnerShown) {
        this.spinnerShown = false;
        process.stdout.write("\r\x1b[2K");
      }
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

  private async sessions(): Promise<void> {
    const rows = await this.view.listRecent(10);
    this.lastListing = rows;
    if (rows.length === 0) return this.status("no saved sessions yet");
    rows.forEach((x, i) => {
      const mark = x.id === this.session?.id ? "*" : " ";
      const when = new Date(x.updatedAtMs).toISOString().slice(0, 16).replace("T", " ");
      this.line(`${mark} ${String(i + 1).padStart(2)}. ${x.id}  ${this.s.dim(when)}  ${this.s.dim(x.cwd ?? "?")}  ${x.title ?? this.s.dim("(untitled)")}`);
    });
    this.status("/resume <n|id-prefix> to continue one");
  }

  /** Shows a stored session's history, then continues it over SCV in its own cwd. */
  private async resume(ref: string): Promise<void> {
    let id: string;
    const row = /^\d+$/.test(ref) ? this.lastListing[Number(ref) - 1] : undefined;
    if (row !== undefined) id = row.id;
    else {
      const r = await this.view.resolve(ref);
      if ("error" in r) return this.status(r.error);
      id = r.id;
    }
    const h = await this.view.history(id);
    if (h === null) return this.status("that session cannot be read");
    await this.dropLink();
    const s = await this.ensureSession(id);
    if (h.omitted) this.status("older history is not shown");
    const last = new Map<string, number>();
    h.records.forEach((r, i) => {
      if (r.kind === "assistant") last.set(`${r.turn_id}/${r.message_id}`, i);
    });
    h.records.forEach((r, i) => {
      if (r.kind === "user") this.line(`${this.s.bold("you:")}\n${r.text}`);
      else if (r.kind === "assistant" && last.get(`${r.turn_id}/${r.message_id}`) === i && r.text !== "") this.line(`${this.s.bold("assistant:")}\n${r.text}`);
      else if (r.kind === "tool_call") this.status(shortArgs(r.name, r.arguments));
      else if (r.kind === "terminal" && r.status !== "completed") this.status(`turn ${r.status}`);
      else if (r.kind === "checkpoint") this.line(`${this.s.bold("summary:")}\n${r.summary}`);
    });
    this.status(`resumed ${id} in ${s.cwd}${s.cwd !== this.cwd ? " (the session's own directory)" : ""}`);
  }

  private async svc(): Promise<ServiceHandle> {
    this.service ??= await startService();
    return this.service;
  }

  private async models(provider: string): Promise<ModelEntry[]> {
    const client = (await this.svc()).client;
    let page = await client.catalogModels(provider);
    if (page.state !== "fresh_cache") {
      try {
        await client.catalogRefresh(provider);
        page = await client.catalogModels(provider);
      } catch (err) {
        this.status(`could not refresh ${provider}'s models: ${describeError(err)}`);
      }
    }
    const all = [...page.entries];
    while (page.next_offset !== null && all.length < 256) {
      page = await client.catalogModels(provider, { offset: page.next_offset });
      all.push(...page.entries);
    }
    return all;
  }

  private async model(args: string[]): Promise<void> {
    const client = (await this.svc()).client;
    const cfg = await client.configGet();
    const current = cfg.selection;
    const providers = (await client.catalogProviders()).entries.map((p) => p.provider_id);
    if (args.length === 0) {
      this.status(`providers: ${providers.join(", ")}`);
      const models = await this.models(current.provider_id);
      this.lastModels = models;
      if (models.length === 0) this.status(`no models listed for ${current.provider_id}`);
      models.forEach((m, i) => {
        const mark = m.model_id === current.model_id ? "*" : " ";
        this.line(`${mark} ${String(i + 1).padStart(2)}. ${m.model_id}${m.label !== m.model_id ? this.s.dim(` (${m.label})`) : ""}${m.available ? "" : this.s.dim(" unavailable")}`);
      });
      return this.status("switch with /model <n|model-id> or /model <provider> <model-id>");
    }
    let target: { provider_id: string; model_id: string };
    if (args.length >= 2) target = { provider_id: args[0]!, model_id: args[1]! };
    else if (/^\d+$/.test(args[0]!)) {
      const m = this.lastModels[Number(args[0]) - 1];
      if (m === undefined) return this.status("no such entry; run /model to list models");
      target = { provider_id: m.provider_id, model_id: m.model_id };
    } else if (providers.includes(args[0]!)) return this.status(`${args[0]} is a provider; use /model ${args[0]} <model-id> (or /model to list models)`);
    else target = { provider_id: current.provider_id, model_id: args[0]! };
    const known = await this.models(target.provider_id);
    if (known.length > 0 && !known.some((m) => m.model_id === target.model_id)) {
      const { suggest } = await import("./preflight.js");
      return this.status(`${target.model_id} is not a model of ${target.provider_id} (${suggest(target.model_id, known.map((m) => m.model_id))})`);
    }
    const r = await client.configSet({ scope: "global", selection: target });
    const eff = r.effective.selection;
    this.status(`model ${eff.provider_id}/${eff.model_id} (new sessions; /new to start one)`);
    if (eff.provider_id !== target.provider_id || eff.model_id !== target.model_id)
      this.status("saved, but MC_PROVIDER/MC_MODEL or project settings override it");
  }

  private async startLogin(provider: string): Promise<void> {
    if (this.login !== null) return this.status("a sign-in is already running");
    const login = await (await this.svc()).client.startLogin(provider);
    this.login = login;
    this.loginChecking = false;
    const follow = async (): Promise<void> => {
      try {
        for await (const p of login) {
          if (p.state === "authorization_url") {
            this.line(`Open this URL in your browser to sign in:\n  ${p.url}`);
            this.line("Then wait here, or paste the final redirect URL (or the code) and press Enter.");
          } else if (p.state === "callback_received") {
            this.loginChecking = true;
            this.status("checking the sign-in");
          }
        }
        this.line(loginEndLine(await login.result));
      } catch (err) {
        this.error(err);
      } finally {
        this.login = null;
        if (this.running === null) this.prompt();
      }
    };
    void follow();
  }

  private async logout(provider: string | undefined): Promise<void> {
    const client = (await this.svc()).client;
    const id = provider ?? (await client.configGet()).selection.provider_id;
    const r = await client.logout(id);
    this.status(`${r.removed ? "removed the saved credential for" : "no saved credential for"} ${r.provider_id} (environment variables are unchanged)`);
  }
}
