/**
 * `/login`, `/logout` and `/model`: sign-in, catalog and settings live in the app-service (`berth service`), which
 * is started on the first of these commands and closed with the chat.
 * Contract: while a sign-in runs, `login` is set and the chat submits a non-command line to it (never echoed to
 * logs or history); `loginChecking` says its own "checking" line was shown. The login URL is shown without terminal
 * controls (terminal-safe.ts), as every other value from outside the chat: Berth builds it, but from parts that come
 * from the environment and settings (issuer, redirect), and the chat prints what the service sent.
 */
import type { Login, ModelEntry, ServiceHandle } from "../../client/app-service/index.js";
import { describeError, startService } from "./common.js";
import { loginEndLine, type Style } from "./render.js";
import { terminalSafe } from "../terminal-safe.js";

export interface CommandHost {
  readonly s: Style;
  status(text: string): void;
  line(text: string): void;
  error(err: unknown): void;
  promptIfIdle(): void;
  modelChanged(model: string): void;
}

export class ServiceCommands {
  private service: Pick<ServiceHandle, "client" | "close"> | null = null;
  private lastModels: ModelEntry[] = [];
  login: Login | null = null;
  loginChecking = false;

  /** `start`: the app-service to use (tests give one over their own streams). */
  constructor(
    private readonly host: CommandHost,
    private readonly start: () => Promise<Pick<ServiceHandle, "client" | "close">> = startService,
  ) {}

  close(): Promise<void> {
    return this.service?.close() ?? Promise.resolve();
  }

  private async svc(): Promise<Pick<ServiceHandle, "client" | "close">> {
    this.service ??= await this.start();
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
        this.host.status(`could not refresh ${provider}'s models: ${describeError(err)}`);
      }
    }
    const all = [...page.entries];
    while (page.next_offset !== null && all.length < 256) {
      page = await client.catalogModels(provider, { offset: page.next_offset });
      all.push(...page.entries);
    }
    return all;
  }

  async model(args: string[]): Promise<void> {
    const client = (await this.svc()).client;
    const cfg = await client.configGet();
    const current = cfg.selection;
    const providers = (await client.catalogProviders()).entries.map((p) => p.provider_id);
    if (args.length === 0) {
      this.host.status(`providers: ${providers.join(", ")}`);
      const models = await this.models(current.provider_id);
      this.lastModels = models;
      if (models.length === 0) this.host.status(`no models listed for ${current.provider_id}`);
      models.forEach((m, i) => {
        const mark = m.model_id === current.model_id ? "*" : " ";
        this.host.line(`${mark} ${String(i + 1).padStart(2)}. ${m.model_id}${m.label !== m.model_id ? this.host.s.dim(` (${m.label})`) : ""}${m.available ? "" : this.host.s.dim(" unavailable")}`);
      });
      return this.host.status("switch with /model <n|model-id> or /model <provider> <model-id>");
    }
    let target: { provider_id: string; model_id: string };
    if (args.length >= 2) target = { provider_id: args[0]!, model_id: args[1]! };
    else if (/^\d+$/.test(args[0]!)) {
      const m = this.lastModels[Number(args[0]) - 1];
      if (m === undefined) return this.host.status("no such entry; run /model to list models");
      target = { provider_id: m.provider_id, model_id: m.model_id };
    } else if (providers.includes(args[0]!)) return this.host.status(`${args[0]} is a provider; use /model ${args[0]} <model-id> (or /model to list models)`);
    else target = { provider_id: current.provider_id, model_id: args[0]! };
    const known = await this.models(target.provider_id);
    if (known.length > 0 && !known.some((m) => m.model_id === target.model_id)) {
      const { suggest } = await import("./preflight.js");
      return this.host.status(`${target.model_id} is not a model of ${target.provider_id} (${suggest(target.model_id, known.map((m) => m.model_id))})`);
    }
    const r = await client.configSet({ scope: "global", selection: target });
    const eff = r.effective.selection;
    this.host.status(`model ${eff.provider_id}/${eff.model_id} (from the next turn)`);
    this.host.modelChanged(eff.model_id);
    if (eff.provider_id !== target.provider_id || eff.model_id !== target.model_id)
      this.host.status("saved, but MC_PROVIDER/MC_MODEL or project settings override it");
  }

  async startLogin(provider: string): Promise<void> {
    if (this.login !== null) return this.host.status("a sign-in is already running");
    const login = await (await this.svc()).client.startLogin(provider);
    this.login = login;
    this.loginChecking = false;
    const follow = async (): Promise<void> => {
      try {
        for await (const p of login) {
          if (p.state === "authorization_url") {
            // One line (a newline in it would also be a control), so it stays one selectable URL.
            this.host.line(`Open this URL in your browser to sign in:\n  ${terminalSafe(p.url, false)}`);
            this.host.line("Then wait here, or paste the final redirect URL (or the code) and press Enter.");
          } else if (p.state === "callback_received") {
            this.loginChecking = true;
            this.host.status("checking the sign-in");
          }
        }
        this.host.line(loginEndLine(await login.result));
      } catch (err) {
        this.host.error(err);
      } finally {
        this.login = null;
        this.host.promptIfIdle();
      }
    };
    void follow();
  }

  async logout(provider: string | undefined): Promise<void> {
    const client = (await this.svc()).client;
    const id = provider ?? (await client.configGet()).selection.provider_id;
    const r = await client.logout(id);
    this.host.status(`${r.removed ? "removed the saved credential for" : "no saved credential for"} ${r.provider_id} (environment variables are unchanged)`);
  }
}
