/**
 * Assembles the app-service method families from the stores and the runtime (the one place that wires them).
 * Families other than service discovery are lazy: their modules (stores, schemas, runtime) load on first use or in
 * idle time after `initialize`, so a cold start answers `initialize` quickly. Shared instances (the session manager
 * used by sessions and turns) are created once, on first need.
 */
import type { LazyFamily, MethodFamily, Operation } from "../protocols/app-service/descriptor.js";
import { serviceMethods, type InitState, type ServiceInfo } from "../protocols/app-service/service-methods.js";

export interface ServiceDeps {
  home: string;
  /** The launch working directory (project settings scope, default session cwd). */
  cwd: string;
  env: NodeJS.ProcessEnv;
  state: InitState;
  info: ServiceInfo;
  /** I/O diagnostics on stderr (a session write that failed, with its cause and fix). */
  log?: (line: string) => void;
}

/** Memoizes an async factory (first call starts it; later calls share the result). */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= make());
}

export function lazyFamily(methods: readonly Operation[], load: () => Promise<MethodFamily>, prefetch: "eager" | "idle" | "session" = "eager"): LazyFamily {
  return { methods, load, prefetch };
}

export function buildFamilies(deps: ServiceDeps): Array<MethodFamily | LazyFamily> {
  const sessionManager = once(async () => {
    const { SessionManager, SessionStore } = await import("../store/sessions/index.js");
    return new SessionManager(new SessionStore({ home: deps.home }));
  });
  /** Auth store, layered settings and catalog cache, shared by status, auth, catalog/config (and turns). */
  const authConfigStores = once(async () => {
    const [{ AuthStore }, { SettingsStore }, { CatalogCache }] = await Promise.all([
      import("../store/auth/auth-store.js"),
      import("../store/settings/settings-store.js"),
      import("../store/catalog/cache.js"),
    ]);
    return { auth: new AuthStore(deps.home), settings: new SettingsStore({ home: deps.home, projectDir: deps.cwd, env: deps.env }), cache: new CatalogCache({ home: deps.home }) };
  });
  const providerAuthReady = async (): Promise<boolean> => {
    const [{ statusProviderAuthReady }, s] = await Promise.all([import("../runtime/auth/readiness.js"), authConfigStores()]);
    return statusProviderAuthReady(s.settings, s.auth, deps.env);
  };
  return [
    serviceMethods({ info: deps.info, state: deps.state, providerAuthReady }),
    lazyFamily(["session.list", "session.create", "session.open", "session.replay", "session.close"], async () => {
      const { sessionMethods } = await import("../protocols/app-service/sessions.js");
      return sessionMethods({ manager: await sessionManager(), cwd: deps.cwd, ...(deps.log !== undefined ? { log: deps.log } : {}) });
    }),
    lazyFamily(["turn.start", "turn.cancel"], async () => {
      const [{ turnMethods }, { Agent }] = await Promise.all([import("../protocols/app-service/turns.js"), import("../runtime/agent.js")]);
      const runner = new Agent({ home: deps.home, cwd: deps.cwd, env: deps.env });
      // The turn loop, tools and the selected driver load in the background (this family is prefetched while the
      // first session request waits on the disk, or when the input is idle, or loads with a first turn.start): a
      // turn.start arriving meanwhile runs at once and shares those loads (each is loaded once) instead of waiting
      // for the warm-up's own settings reads. The warm-up starts in the next check phase, so this family's modules
      // and the turn loop's run as two separate pieces and a session request's I/O callback can run between them.
      setImmediate(() => void runner.warm());
      return turnMethods({ manager: await sessionManager(), runner, cwd: deps.cwd, ...(deps.log !== undefined ? { log: deps.log } : {}) });
    }, "session"),
    lazyFamily(["auth.status", "auth.login.start", "auth.login.callback", "auth.login.cancel", "auth.logout"], async () => {
      const { authMethods, callbackPortFromEnv, callbackTimeoutMsFromEnv } = await import("../protocols/app-service/auth.js");
      const s = await authConfigStores();
      const port = callbackPortFromEnv(deps.env);
      const timeout = callbackTimeoutMsFromEnv(deps.env);
      return authMethods({
        store: s.auth,
        settings: s.settings,
        env: deps.env,
        ...(port !== undefined ? { callbackPort: port } : {}),
        ...(timeout !== undefined ? { callbackTimeoutMs: timeout } : {}),
      });
    }, "idle"),
    lazyFamily(["catalog.providers", "catalog.models", "catalog.refresh", "config.get", "config.set"], async () => {
      const [{ catalogConfigMethods }, { CatalogReader }, { ConfigService }, { CatalogRefresher }, { CodexTokenRefresher }, { codexOAuthConfigFromEnv }, s] = await Promise.all([
        import("../protocols/app-service/config.js"),
        import("../store/catalog/catalog-reader.js"),
        import("../store/settings/config.js"),
        import("../runtime/auth/catalog-refresh.js"),
        import("../runtime/auth/credentials.js"),
        import("../runtime/auth/codex-oauth.js"),
        authConfigStores(),
      ]);
      const codex = new CodexTokenRefresher({ store: s.auth, oauth: codexOAuthConfigFromEnv(deps.env) });
      return catalogConfigMethods({
        config: new ConfigService({ settings: s.settings, cache: s.cache, env: deps.env }),
        reader: new CatalogReader({ settings: s.settings, cache: s.cache, env: deps.env }),
        refresher: new CatalogRefresher({ settings: s.settings, cache: s.cache, store: s.auth, codex, env: deps.env }),
      });
    }, "idle"),
  ];
}
