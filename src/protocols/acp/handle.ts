/**
 * Handler registration with Berth's error policy: a handler's `RequestError` (the fixed `ACP_ERRORS`) goes to the
 * wire as it is; anything else is logged to stderr as its error name/code only and answered with the fixed internal
 * error, so no exception text ever reaches the client (the SDK would otherwise put it in the error's `data`).
 */
import { RequestError, type AgentApp, type AgentRequestHandlersByMethod, type AgentRequestMethod } from "@agentclientprotocol/sdk";
import { ACP_ERRORS } from "./errors.js";

/** A safe label for an unexpected error: its code or class name, never its message. */
export function errorLabel(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as NodeJS.ErrnoException).code;
    return typeof code === "string" && /^[A-Z0-9_]{1,40}$/.test(code) ? code : e.name;
  }
  return typeof e;
}

export function handle<M extends AgentRequestMethod>(app: AgentApp, log: (line: string) => void, method: M, handler: AgentRequestHandlersByMethod[M]): void {
  const h = handler as (ctx: unknown) => unknown;
  const wrapped = async (ctx: unknown): Promise<unknown> => {
    try {
      return await h(ctx);
    } catch (e) {
      if (e instanceof RequestError) throw e;
      log(`berth acp: ${method} failed (${errorLabel(e)})`);
      throw ACP_ERRORS.internal();
    }
  };
  app.onRequest(method, wrapped as AgentRequestHandlersByMethod[M]);
}
