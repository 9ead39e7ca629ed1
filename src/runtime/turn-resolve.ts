/**
 * A turn's settings, resolved (`TurnResolver.resolve`, at every turn and for a session's `describe`): the settings are
 * re-read (shared, frozen layers: a `stat` per file while unchanged), the selection is the settings' with a session's
 * own override, the provider is built once per definition and reused while it is unchanged (provider-cache.ts), and
 * the tool configuration is that of the global layer. One per `Agent` (agent.ts); failures are `TurnFailure`s.
 */
import { AuthStore } from "../store/auth/auth-store.js";
import { CatalogCache } from "../store/catalog/cache.js";
import { builtinBaseUrl, findProvider } from "../store/catalog/providers.js";
import type { EnvLike } from "../store/home.js";
import { ConfigService, type RuntimeSelection } from "../store/settings/config.js";
import { MAX_JSON_DEPTH, MAX_JSON_FILE_BYTES } from "../store/settings/locked-json.js";
import type { McpServerDef } from "../store/settings/schema.js";
import { SettingsError, SettingsStore, type SettingsLayers } from "../store/settings/settings-store.js";
import { anthropicCredentialSource, codexCredentialSource, CodexTokenRefresher, customCredentialSource } from "./auth/credentials.js";
import { codexOAuthConfigFromEnv } from "./auth/codex-oauth-config.js";
import type { FailureReason } from "./events.js";
import { resolveBaseUrl } from "./providers/base-url.js";
import type { OpenedProvider, ProviderConfig, ProviderOptions } from "./providers/make.js";
import { ProviderCache } from "./provider-cache.js";
import { openProvider } from "./providers/open.js";
import type { ToolConfig } from "./tool-registries.js";
import type { CredentialSource, Provider, ThinkingLevel } from "./types.js";

/** A session's own provider/model/base URL/reasoning; unset fields follow the settings. */
export interface SelectionOverride {
  provider?: string;
  model?: string;
  baseUrl?: string;
  reasoning?: ThinkingLevel;
}

export class TurnFailure extends Error {
  /** `detail`: a fixed text naming the cause and its fix (never file contents or paths), the turn's failure message. */
  constructor(
    readonly reason: FailureReason,
    readonly detail?: string,
  ) {
    super(`turn failed: ${reason}`);
    this.name = "TurnFailure";
  }
}

export interface Resolved extends ToolConfig {
  provider: Provider;
  /** The reusable provider this turn was given (null for a described selection). */
  opened: OpenedProvider | null;
  selection: RuntimeSelection & { model_id: string };
  images: boolean;
  /** A custom provider's base URL as configured (null for a built-in one); it may carry a credential. */
  baseUrl: string | null;
}

/** The provider of a `describe` resolution, which never streams. */
const UNBUILT: Provider = {
  id: "",
  api: "openai-chat",
  stream: () => {
    throw new Error("a described provider is not built");
  },
};

export class TurnResolver {
  readonly settings: SettingsStore;
  private readonly config: ConfigService;
  private readonly auth: AuthStore;
  private codex: CodexTokenRefresher | null = null;
  /** Providers built for turns, reused while what they were built from is unchanged (`resolve`). */
  readonly built = new ProviderCache();
  /** Per shared global settings layer (frozen; a changed file is a new object): its tool configuration. */
  private readonly toolConfigs = new WeakMap<object, ToolConfig>();
  /** Per shared custom provider definition: its JSON. */
  private readonly defJsons = new WeakMap<object, string>();

  constructor(private readonly o: { home: string; cwd: string; env: EnvLike; settings?: SettingsStore; providerOptions?: ProviderOptions }) {
    this.settings = o.settings ?? new SettingsStore({ home: o.home, projectDir: o.cwd, env: o.env });
    this.config = new ConfigService({ settings: this.settings, cache: new CatalogCache({ home: o.home }), env: o.env });
    this.auth = new AuthStore(o.home);
  }

  /** The tool part of the settings (global layer), with a session's own MCP servers in place of the settings'. */
  static toolConfig(global: SettingsLayers["global"], mcpOverride?: Record<string, McpServerDef>): ToolConfig {
    return {
      mcp: mcpOverride ?? global.mcp_servers ?? {},
      keyEnvs: Object.values(global.providers ?? {}).flatMap((p) => (p.api_key_env !== undefined ? [p.api_key_env] : [])),
      toolSettings: global.tools,
      autoApproveHosts: global.web_fetch?.auto_approve_hosts ?? [],
      globalKey: JSON.stringify([global.mcp_servers ?? {}, global.providers ?? {}, global.tools ?? null, global.web_fetch ?? null]),
    };
  }

  /** `toolConfig` of a shared (frozen, `SettingsStore.loadShared`) global layer, kept while that layer is the same. */
  private toolConfigOf(global: SettingsLayers["global"], mcpOverride?: Record<string, McpServerDef>): ToolConfig {
    if (mcpOverride !== undefined) return TurnResolver.toolConfig(global, mcpOverride);
    let c = this.toolConfigs.get(global);
    if (c === undefined) this.toolConfigs.set(global, (c = TurnResolver.toolConfig(global)));
    return c;
  }

  /** A custom provider definition as JSON (part of a built provider's key), kept per shared definition object. */
  private defJson(def: object): string {
    let j = this.defJsons.get(def);
    if (j === undefined) this.defJsons.set(def, (j = JSON.stringify(def)));
    return j;
  }

  /**
   * Reloads settings, resolves the selection and builds this turn's provider (`selectionOnly`, for `describe`: checks
   * the definition as building would, without loading the provider's driver). Throws a `TurnFailure`.
   */
  async resolve(over: SelectionOverride = {}, mcpOverride?: Record<string, McpServerDef>, selectionOnly = false): Promise<Resolved> {
    let sel: RuntimeSelection;
    let layers;
    try {
      // Shared, frozen layers (the same object while both files and the environment layer are unchanged): the memos
      // below key on them, so a warm turn only re-checks the files (a `stat` each) and the catalog.
      layers = await this.settings.loadShared();
      // A session's own provider / model sit above the settings' layers, resolved by the same rule (a provider named
      // alone brings its own model, not the settings' model of another provider) and with its metadata looked up.
      sel = await this.config.runtimeSelection(layers, { provider: over.provider, model: over.model });
    } catch (e) {
      throw new TurnFailure("selection", e instanceof SettingsError ? settingsProblem(e) : undefined);
    }
    if (over.reasoning !== undefined) sel = { ...sel, thinking_level: over.reasoning };
    if (sel.model_id === null) throw new TurnFailure("selection");
    const env = this.o.env;
    const entry = findProvider(layers.global, sel.provider_id);
    if (entry === undefined) throw new TurnFailure("selection");
    const opts: ProviderOptions = { env, ...this.o.providerOptions };
    const images = entry.builtin || entry.def.models.find((m) => m.id === sel.model_id)?.images === true;
    // `describe` (a session's start) checks the definition as creating the provider would, without loading its driver.
    let opened: OpenedProvider | null = null;
    const open = async (id: string, def: ProviderConfig, creds: CredentialSource): Promise<Provider> => {
      if (selectionOnly) {
        new URL(def.endpoint ?? resolveBaseUrl(def.api, def.baseUrl, opts.env));
        return UNBUILT;
      }
      // The credential sources read the environment and the auth store at each request; a custom provider's reads
      // its definition, which is part of the key.
      const key = JSON.stringify([id, def.api, def.baseUrl ?? null, resolveBaseUrl(def.api, def.baseUrl, env)]) + (entry.builtin ? "" : this.defJson(entry.def));
      return (opened = await this.built.get(key, () => openProvider(id, def, creds, opts)));
    };
    let provider: Provider;
    try {
      if (!entry.builtin) {
        provider = await open(
          entry.id,
          { api: entry.def.api, baseUrl: over.baseUrl ?? entry.def.base_url, ...(entry.def.stream_idle_timeout_ms !== undefined ? { idleTimeoutMs: entry.def.stream_idle_timeout_ms } : {}) },
          customCredentialSource(entry.def, env),
        );
      } else if (entry.id === "anthropic") {
        provider = await open("anthropic", { api: "anthropic", baseUrl: over.baseUrl ?? builtinBaseUrl("anthropic", env) }, anthropicCredentialSource(env, this.auth));
      } else {
        this.codex ??= new CodexTokenRefresher({ store: this.auth, oauth: codexOAuthConfigFromEnv(env) });
        provider = await open(
          "openai-codex",
          { api: "openai-responses", baseUrl: over.baseUrl ?? builtinBaseUrl("openai-codex", env) },
          codexCredentialSource(this.codex),
        );
      }
    } catch {
      throw new TurnFailure("selection");
    }
    const baseUrl = entry.builtin ? null : (over.baseUrl ?? entry.def.base_url);
    return { ...this.toolConfigOf(layers.global, mcpOverride), provider, opened, selection: { ...sel, model_id: sel.model_id }, images, baseUrl };
  }
}

/** What is wrong with a settings file and how to fix it, without its file path or any value in it (keys only). */
function settingsProblem(e: SettingsError): string {
  const file = e.scope === "global" ? "the global settings file (settings.json in the Berth home, $MC_HOME)" : "the project settings file (.berth/settings.json in the workspace)";
  const what =
    e.reason === "unreadable"
      ? "cannot be read; check its permissions"
      : e.reason === "not_file"
        ? "is not a regular file (a directory, FIFO or device); replace it with a file or remove it"
        : e.reason === "too_large"
          ? `is larger than settings files may be (${MAX_JSON_FILE_BYTES / (1024 * 1024)} MiB)`
          : e.reason === "too_deep"
            ? `nests values deeper than settings may (${MAX_JSON_DEPTH} levels of objects and arrays); flatten it or remove the deep value`
          : e.reason === "not_utf8"
            ? "is not UTF-8 text; save it as UTF-8 (`berth chat` shows where)"
          : e.reason === "invalid"
        ? `has a setting of the wrong shape${e.at !== undefined && e.at !== "$" ? ` at ${e.at}` : ""}; fix or remove it (\`berth chat\` says what it must be)`
        : "is not valid JSON; fix or remove it (`berth chat` shows the line and column)";
  return `${file} ${what}`;
}
