/**
 * `initialize`, `authenticate` and `logout`.
 *
 * Contracts:
 * - `initialize` always answers `protocolVersion: 1` (the only version Berth speaks), whatever the client asked;
 *   the client's capabilities are recorded for the connection. Before a successful `initialize` every other request
 *   is answered `-32600` (the SDK's initialization gate).
 * - `authMethods` lists one agent-run method, `openai-codex` ("Sign in with ChatGPT"): `authenticate` runs Berth's
 *   Codex browser login (the URL goes to stderr and to the opener) and answers `{}` once the login is stored in
 *   Berth's auth store; any other end is `-32000` naming the state. Cancelling the request cancels the login.
 * - `logout` removes every credential Berth stored (Codex login, Anthropic key); keys in the environment stay.
 */
import { PROTOCOL_VERSION, type AgentApp, type AuthMethod, type InitializeResponse } from "@agentclientprotocol/sdk";
import { ANTHROPIC_PROVIDER_ID, AuthStore, CODEX_PROVIDER_ID } from "../../store/auth/auth-store.js";
import type { CodexLogin, LoginTerminalState } from "../../runtime/auth/codex-login.js";
import type { AcpConnectionState, AcpDeps } from "./context.js";
import { errorLabel, handle } from "./handle.js";
import { ACP_ERRORS } from "./errors.js";
import { AGENT_CAPABILITIES } from "./capabilities.js";

export const CODEX_AUTH_METHOD: AuthMethod = {
  id: CODEX_PROVIDER_ID,
  name: "Sign in with ChatGPT",
  description: "Berth opens the OpenAI sign-in page in your browser and keeps the login in its auth store (MC_HOME/auth.json).",
};

export function registerInitialize(app: AgentApp, deps: AcpDeps, state: AcpConnectionState, auth: AuthStore): void {
  handle(app, deps.log, "initialize", ({ params }): InitializeResponse => {
    state.client = params.clientCapabilities ?? {};
    return {
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: AGENT_CAPABILITIES,
      authMethods: [CODEX_AUTH_METHOD],
      agentInfo: { name: "berth", title: "Berth", version: deps.version },
    };
  });

  handle(app, deps.log, "authenticate", async ({ params, signal }) => {
    if (params.methodId !== CODEX_AUTH_METHOD.id) throw ACP_ERRORS.unknownAuthMethod();
    let login: CodexLogin;
    try {
      // The sign-in code (OAuth, a loopback listener) loads only when a sign-in starts.
      const [{ CodexLogin }, { codexOAuthConfigFromEnv }, { callbackPortFromEnv, callbackTimeoutMsFromEnv }] = await Promise.all([
        import("../../runtime/auth/codex-login.js"),
        import("../../runtime/auth/codex-oauth.js"),
        import("../app-service/auth.js"),
      ]);
      const port = callbackPortFromEnv(deps.env);
      const timeout = callbackTimeoutMsFromEnv(deps.env);
      login = await CodexLogin.prepare({
        store: auth,
        oauth: codexOAuthConfigFromEnv(deps.env),
        ...(port !== undefined ? { port } : {}),
        ...(timeout !== undefined ? { callbackTimeoutMs: timeout } : {}),
        onEvent: (e) => {
          if (e.type === "progress" && e.state === "authorization_url") {
            deps.log(`berth acp: sign in at ${e.url}`);
            deps.openUrl(e.url);
          }
        },
      });
    } catch (e) {
      deps.log(`berth acp: authenticate could not start the sign-in (${errorLabel(e)})`);
      throw ACP_ERRORS.internal();
    }
    const onAbort = (): void => void login.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    let end: LoginTerminalState;
    try {
      end = await login.run();
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
    if (end !== "exchange_succeeded") throw ACP_ERRORS.loginFailed(end);
    return {};
  });

  handle(app, deps.log, "logout", async () => {
    try {
      await auth.logout(CODEX_PROVIDER_ID);
      await auth.logout(ANTHROPIC_PROVIDER_ID);
    } catch (e) {
      deps.log(`berth acp: logout could not update the auth store (${errorLabel(e)})`);
      throw ACP_ERRORS.internal();
    }
    return {};
  });
}
