/**
 * Interactive `berth chat` over node:readline.
 * Contract:
 * - Lines are handled one at a time, in order; a prompt line runs one turn and the next line waits for its terminal
 *   (type-ahead is kept). Assistant text streams as it arrives; the terminal's `assistant_text` is authoritative
 *   (if the live text differs, the final text is printed).
 * - Ctrl-C: cancels the running turn (or login); a second Ctrl-C before it ends exits. When idle, two Ctrl-Cs exit.
 * - While a login waits for its callback, a non-command line is submitted as the redirect URL or code (never echoed
 *   to logs; it is shown only where the user typed it).
 * - Failures print one plain line; the loop continues unless the service itself stopped.
 * - Output that arrives while the prompt is shown (login progress and result, Ctrl-C notes) first moves off the
 *   prompt line (clears it on a capable terminal, else starts a new line); the prompt is shown again afterwards.
 */
import { createInterface, type Interface } from "node:readline";
import type { AppServiceClient, Login, ModelEntry, ServiceHandle, Turn } from "../../client/app-service/index.js";
import { describeError, startService } from "./common.js";
import { activityLine, gauge, HELP, loginEndLine, NO_PROVIDER_HELP, style, terminalLine, type Style } from "./render.js";

export async function runInteractive(o: { sessionId: string | null }): Promise<number> {
  let handle: ServiceHandle;
  try {
    handle = await startService();
  } catch (err) {
    process.stderr.write(`berth chat: ${describeError(err)}\n`);
    return 1;
  }
  return new Chat(handle).run(o.sessionId);
}

class Chat {
  private readonly client: AppServiceClient;
  private readonly s: Style;
  private rl!: Interface;
  private sessionId: string | null = null;
  private running: Turn | null = null;
  private cancelling = false;
  private login: Login | null = null;
  /** The running login reported `callback_received` (its own "checking" line supersedes "submitted"). */
  private loginChecking = false;
  private idleInterrupt = false;
  private atLineStart = true;
  /** The prompt is on screen and nothing was written after it (the cursor sits on the prompt line). */
  private promptShown = false;
  /** Whether readline redraws the prompt line (a terminal other than TERM=dumb) so it can be cleared. */
  private redraws = false;
  private ctx: { current: number; max: number } | null = null;
  private sessionsAfter: string | null = null;
  private lastModels: ModelEntry[] = [];
  private queue: Promise<void> = Promise.resolve();
  private done: ((code: number) => void) | null = null;
  private exiting = false;

  constructor(private readonly handle: ServiceHandle) {
    this.client = handle.client;
    this.s = style(process.stdout.isTTY === true && process.env.NO_COLOR === undefined);
  }

  private write(text: string): void {
    if (text.length === 0) return;
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

  async run(resume: string | null): Promise<number> {
    const terminal = process.stdin.isTTY === true && process.stdout.isTTY === true;
    this.rl = createInterface({ input: process.stdin, output: process.stdout, terminal, prompt: "› " });
    this.redraws = terminal && process.env.TERM !== "dumb";
    const code = new Promise<number>((resolve) => (this.done = resolve));
    this.rl.on("line", (l) => {
      this.promptShown = false; // the echoed Enter left the prompt line
      this.enqueue(() => this.onLine(l));
    });
    this.rl.on("SIGINT", () => this.interrupt());
    const onSignal = (): void => this.interrupt();
    if (!terminal) process.on("SIGINT", onSignal);
    this.rl.on("close", () => this.finish(0));
    void this.client.closed.then(() => {
      if (this.exiting) return;
      this.line(this.s.red("The Berth service stopped."));
      this.finish(1);
    });
    this.enqueue(async () => {
      await this.banner();
      if (resume !== null) await this.resume(resume);
    });
    const c = await code;
    process.off("SIGINT", onSignal);
    return c;
  }

  private enqueue(task: () => Promise<void>): void {
    this.queue = this.queue
      .then(task)
      .catch((err: unknown) => this.error(err))
      .then(() => {
        if (this.running === null) this.prompt();
      });
  }

  /** Shows the prompt (keeping any partly typed input) unless exiting or it is already the last thing shown. */
  private prompt(): void {
    if (this.exiting || this.promptShown) return;
    this.rl.prompt(true);
    this.promptShown = true;
  }

  private finish(code: number): void {
    if (this.exiting) return;
    this.exiting = true;
    this.rl.close();
    const done = this.done;
    // Ending the service's stdin cancels a running turn or login; wait for it to exit.
    void this.handle.close().then(() => done?.(code));
  }

  private interrupt(): void {
    if (this.running !== null) {
      if (this.cancelling) return this.finish(130);
      this.cancelling = true;
      this.status("cancelling (Ctrl-C again to exit)");
      void this.running.cancel().catch(() => {});
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
    this.line(this.s.bold("berth chat") + this.s.dim(" — /help for commands, Ctrl-C to cancel"));
    const [st, cfg] = await Promise.all([this.client.status(), this.client.configGet().catch(() => null)]);
    if (cfg !== null) this.status(`model ${cfg.selection.provider_id}/${cfg.selection.model_id}`);
    if (!st.provider_auth_ready) this.line(NO_PROVIDER_HELP.trimEnd());
  }

  private async onLine(raw: string): Promise<void> {
    this.idleInterrupt = false;
    const text = raw.trim();
    if (text.length === 0) return;
    if (!text.startsWith("/")) {
      const login = this.login;
      if (login !== null) {
        await login.submit(text);
        // The login's progress may already have been reported (or it ended) before the submit was answered.
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
        if (this.sessionId !== null && this.client.attached.has(this.sessionId)) await this.client.closeSession(this.sessionId);
        this.sessionId = null;
        this.ctx = null;
        return this.status("new conversation");
      case "/sessions":
        return this.sessions(args[0] === "more");
      case "/resume":
        if (args[0] === undefined) return this.status("usage: /resume <session-id> (see /sessions)");
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

  private async turn(prompt: string): Promise<void> {
    const turn = await this.client.startTurn({ prompt, sessionId: this.sessionId });
    this.sessionId = turn.sessionId;
    this.running = turn;
    this.cancelling = false;
    let live = "";
    try {
      for await (const u of turn) {
        if (u.type === "delta") {
          this.write(u.text);
          live += u.text;
          continue;
        }
        const a = u.activity;
        if (a.kind === "context") this.ctx = { current: a.current_tokens, max: a.max_tokens };
        const l = activityLine(a);
        if (l !== null) this.status(l);
      }
      const t = await turn.result;
      if (t.assistant_text !== live) {
        if (live.length > 0 && t.assistant_text.startsWith(live)) this.write(t.assistant_text.slice(live.length));
        else if (t.assistant_text.length > 0) {
          if (live.length > 0) this.line(this.s.dim("(final answer)"));
          this.write(t.assistant_text);
        }
      }
      const g = this.ctx !== null ? ` · ${gauge(this.ctx.current, this.ctx.max)}` : "";
      const label = terminalLine(t);
      this.line(this.s.dim(`── ${t.status === "failed" ? this.s.red(label) : label}${g}`));
      if (t.status === "failed") {
        const st = await this.client.status().catch(() => null);
        if (st !== null && !st.provider_auth_ready) this.line(NO_PROVIDER_HELP.trimEnd());
      }
    } finally {
      this.running = null;
      this.cancelling = false;
    }
  }

  private async sessions(more: boolean): Promise<void> {
    if (more && this.sessionsAfter === null) return this.status("no more sessions");
    const page = await this.client.listSessions({ after: more ? this.sessionsAfter : null, limit: 10 });
    if (page.sessions.length === 0 && !page.truncated) this.status(more ? "no more sessions" : "no saved sessions yet");
    for (const x of page.sessions) {
      const mark = x.session_id === this.sessionId ? "*" : " ";
      this.line(`${mark} ${x.session_id}  ${this.s.dim(x.updated_at.slice(0, 16).replace("T", " "))}  ${x.title ?? this.s.dim("(untitled)")}`);
    }
    if (page.incomplete) this.status("some sessions could not be read");
    this.sessionsAfter = page.truncated ? page.next_after : null;
    if (page.truncated) this.status("/sessions more for the next page; /resume <id> to continue one");
  }

  /** Attaches the session, prints its durable history (replay pages), then continues it. */
  private async resume(id: string): Promise<void> {
    await this.client.openSession(id);
    if (this.sessionId !== null && this.sessionId !== id && this.client.attached.has(this.sessionId))
      await this.client.closeSession(this.sessionId).catch(() => {});
    let any = false;
    for await (const page of this.client.replay(id)) {
      if (page.resync_required) {
        if (any) this.status("history changed while loading; reloading");
        continue;
      }
      if (page.gap) this.status("some older history is not available");
      for (const e of page.events) {
        any = true;
        if (e.kind === "terminal") {
          if (e.status !== "completed") this.status(`turn ${e.status}`);
          continue;
        }
        if (e.part === 0) this.line(this.s.bold(e.kind === "summary" ? "summary:" : e.role === "user" ? "you:" : "assistant:"));
        this.write(e.text);
        if (e.last_part) this.line("");
      }
    }
    this.sessionId = id;
    this.ctx = null;
    this.status(any ? `resumed ${id}` : `resumed ${id} (no history yet)`);
  }

  /** Cached models of a provider, refreshing the catalog once when it is not fresh. */
  private async models(provider: string): Promise<ModelEntry[]> {
    let page = await this.client.catalogModels(provider);
    if (page.state !== "fresh_cache") {
      try {
        await this.client.catalogRefresh(provider);
        page = await this.client.catalogModels(provider);
      } catch (err) {
        this.status(`could not refresh ${provider}'s models: ${describeError(err)}`);
      }
    }
    const all = [...page.entries];
    while (page.next_offset !== null && all.length < 256) {
      page = await this.client.catalogModels(provider, { offset: page.next_offset });
      all.push(...page.entries);
    }
    return all;
  }

  private async model(args: string[]): Promise<void> {
    const cfg = await this.client.configGet();
    const current = cfg.selection;
    if (args.length === 0) {
      const providers = await this.client.catalogProviders();
      this.status(`providers: ${providers.entries.map((p) => p.provider_id).join(", ")}`);
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
    } else target = { provider_id: current.provider_id, model_id: args[0]! };
    await this.models(target.provider_id);
    const r = await this.client.configSet({ scope: "global", selection: target });
    const eff = r.effective.selection;
    this.status(`model ${eff.provider_id}/${eff.model_id}`);
    if (eff.provider_id !== target.provider_id || eff.model_id !== target.model_id)
      this.status("saved, but MC_PROVIDER/MC_MODEL or project settings override it");
  }

  private async startLogin(provider: string): Promise<void> {
    if (this.login !== null) return this.status("a sign-in is already running");
    const login = await this.client.startLogin(provider);
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
    const id = provider ?? (await this.client.configGet()).selection.provider_id;
    const r = await this.client.logout(id);
    this.status(`${r.removed ? "removed the saved credential for" : "no saved credential for"} ${r.provider_id} (environment variables are unchanged)`);
  }
}
