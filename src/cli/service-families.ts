/**
 * Assembles the app-service method families from the stores and the runtime (the one place that wires them).
 * Families other than service discovery are lazy: their modules (stores, schemas, runtime) load on first use or in
 * idle time after `initialize`, so a cold start answers `initialize` quickly. Shared instances (the session manager
 * used by sessions and turns) are created once, on first need.
 */
import type { LazyFamily, MethodFamily, Operation } from "../protocols/app-service/descriptor.js";
import { pendingFamily, serviceMethods, type InitState, type ServiceInfo } from "../protocols/app-service/service-methods.js";

export interface ServiceDeps {
  home: string;
  /** The launch working directory (project settings scope, default session cwd). */
  cwd: string;
  env: NodeJS.ProcessEnv;
  state: InitState;
  info: ServiceInfo;
}

/** Memoizes an async factory (first call starts it; later calls share the result). */
export function once<T>(make: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= make());
}

export function lazyFamily(methods: readonly Operation[], load: () => Promise<MethodFamily>): LazyFamily {
  return { methods, load };
}

export async function buildFamilies(deps: ServiceDeps): Promise<Array<MethodFamily | LazyFamily>> {
  const sessionManager = once(async () => {
    const { SessionManager, SessionStore } = await import("../store/sessions/index.js");
    return new SessionManager(new SessionStore({ home: deps.home }));
  });
  return [
    serviceMethods({ info: deps.info, state: deps.state, providerAuthReady: async () => false }),
    lazyFamily(["session.list", "session.create", "session.open", "session.replay", "session.close"], async () => {
      const { sessionMethods } = await import("../protocols/app-service/sessions.js");
      return sessionMethods({ manager: await sessionManager(), cwd: deps.cwd });
    }),
    pendingFamily(["turn.start"], "optional"),
    pendingFamily(["turn.cancel"], "forbidden"),
    pendingFamily(["auth.status", "auth.login.start", "auth.login.callback", "auth.login.cancel", "auth.logout"], "forbidden"),
    pendingFamily(["catalog.providers", "catalog.models", "catalog.refresh", "config.get", "config.set"], "forbidden"),
  ];
}
