/** Assembles the app-service method families from the stores and the runtime (the one place that wires them). */
import type { MethodFamily } from "../protocols/app-service/descriptor.js";
import { sessionMethods } from "../protocols/app-service/sessions.js";
import { SessionManager, SessionStore } from "../store/sessions/index.js";
import { pendingFamily, serviceMethods, type InitState, type ServiceInfo } from "../protocols/app-service/service-methods.js";

export interface ServiceDeps {
  home: string;
  /** The launch working directory (project settings scope, default session cwd). */
  cwd: string;
  env: NodeJS.ProcessEnv;
  state: InitState;
  info: ServiceInfo;
}

export async function buildFamilies(deps: ServiceDeps): Promise<MethodFamily[]> {
  return [
    serviceMethods({ info: deps.info, state: deps.state, providerAuthReady: async () => false }),
    sessionMethods({ manager: new SessionManager(new SessionStore({ home: deps.home })), cwd: deps.cwd }),
    pendingFamily(["turn.start"], "optional"),
    pendingFamily(["turn.cancel"], "forbidden"),
    pendingFamily(["auth.status", "auth.login.start", "auth.login.callback", "auth.login.cancel", "auth.logout"], "forbidden"),
    pendingFamily(["catalog.providers", "catalog.models", "catalog.refresh", "config.get", "config.set"], "forbidden"),
  ];
}
