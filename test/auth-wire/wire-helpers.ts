/** Small helpers over a spawned service for the auth/catalog/config wire tests. */
import { ServiceProcess, type ServiceProcessOptions } from "../helpers/service-process.js";

export type Msg = Record<string, any>;

/** Waits for the first stdout record (from index `from`) matching `pred`. */
export async function waitFor(svc: ServiceProcess, pred: (m: Msg) => boolean, from = 0): Promise<Msg> {
  for (let n = from + 1; ; n++) {
    await svc.waitLines(n);
    if (svc.lines.length < n) throw new Error(`service ended before the expected record; stderr: ${svc.stderr.slice(0, 400)}`);
    const m = JSON.parse(svc.lines[n - 1]!) as Msg;
    if (pred(m)) return m;
  }
}

export const progress = (state: string) => (m: Msg) => m.event === "auth.login.progress" && m.payload.state === state;
export const terminal = (m: Msg) => m.event === "auth.login.terminal";

/** A started, initialized service for a loopback fake issuer (callback listener on a free port). */
export async function loginService(issuer: string, opts: ServiceProcessOptions = {}): Promise<ServiceProcess> {
  const svc = new ServiceProcess({ ...opts, env: { BERTH_OPENAI_AUTH_ISSUER: issuer, BERTH_OPENAI_AUTH_CALLBACK_PORT: "0", ...opts.env } });
  await svc.initialize();
  return svc;
}

/** Starts a Codex login; resolves with its login ID and authorization URL. */
export async function startLogin(svc: ServiceProcess, requestId: string): Promise<{ loginId: string; url: string }> {
  const from = svc.lines.length;
  const res = await svc.request("auth.login.start", { provider_id: "openai-codex" }, {}, requestId);
  if (res.error !== null) throw new Error(`login start failed: ${JSON.stringify(res.error)}`);
  const ev = await waitFor(svc, progress("authorization_url"), from);
  return { loginId: res.payload.login_id as string, url: ev.payload.url as string };
}
