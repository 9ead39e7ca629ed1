/** Shared helpers for turn tests: a spawned service wired to a loopback fake provider through settings.json. */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider, type FakeProviderOptions } from "../fakes/fake-provider.js";
import { ServiceProcess, type ServiceProcessOptions } from "../helpers/service-process.js";

export const FAKE_PROVIDER_ID = "fake";
export const FAKE_MODEL_ID = "fake-model";

/** Settings selecting the fake (Chat Completions by default) as a custom no-auth provider. */
export function fakeSettings(baseUrl: string, extra: { api?: "openai-chat" | "openai-responses" | "anthropic"; contextWindow?: number; mcp?: Record<string, unknown> } = {}): Record<string, unknown> {
  const api = extra.api ?? "openai-chat";
  return {
    providers: {
      [FAKE_PROVIDER_ID]: {
        api,
        base_url: api === "anthropic" ? baseUrl : `${baseUrl}/v1`,
        auth: "none",
        models: [{ id: FAKE_MODEL_ID, ...(extra.contextWindow !== undefined ? { context_window: extra.contextWindow } : {}) }],
      },
    },
    provider: FAKE_PROVIDER_ID,
    model: FAKE_MODEL_ID,
    ...(extra.mcp !== undefined ? { mcp_servers: extra.mcp } : {}),
  };
}

export interface TurnRig {
  fake: FakeProvider;
  svc: ServiceProcess;
  close(): Promise<void>;
}

export async function startRig(
  opts: { fake?: FakeProviderOptions; settings?: Parameters<typeof fakeSettings>[1]; svc?: ServiceProcessOptions } = {},
): Promise<TurnRig> {
  const fake = await startFakeProvider(opts.fake);
  const svc = new ServiceProcess({ ...opts.svc, env: { ...opts.svc?.env } });
  mkdirSync(svc.home, { recursive: true });
  writeFileSync(join(svc.home, "settings.json"), JSON.stringify(fakeSettings(fake.baseUrl, opts.settings)));
  await svc.initialize();
  return {
    fake,
    svc,
    close: async () => {
      if (svc.child.exitCode === null) {
        svc.end();
        await svc.exited;
      }
      await fake.close();
    },
  };
}

export type Msg = Record<string, any>;

/** Parsed stdout lines from index `from`. */
export function parsed(svc: ServiceProcess, from = 0): Msg[] {
  return svc.lines.slice(from).map((l) => JSON.parse(l) as Msg);
}

/** Waits until the terminal event of the turn started by request `requestId` arrives; returns that turn's events. */
export async function waitTerminal(svc: ServiceProcess, requestId: string, timeoutMs = 60_000): Promise<Msg[]> {
  const deadline = Date.now() + timeoutMs;
  for (let n = 1; ; n++) {
    const events = parsed(svc).filter((m) => m.kind === "event" && m.request_id === requestId);
    if (events.some((e) => e.event === "turn.terminal")) return events;
    if (Date.now() > deadline) throw new Error(`no terminal for ${requestId}; stderr: ${svc.stderr.slice(0, 400)}`);
    await svc.waitLines(svc.lines.length + 1, Math.max(1, deadline - Date.now())).catch(() => undefined);
    if (svc.child.exitCode !== null && n > 1) {
      const again = parsed(svc).filter((m) => m.kind === "event" && m.request_id === requestId);
      if (!again.some((e) => e.event === "turn.terminal")) throw new Error(`service exited without terminal; stderr: ${svc.stderr.slice(0, 400)}`);
    }
  }
}

export function startTurn(svc: ServiceProcess, prompt: string, requestId: string, sessionId?: string): Promise<Msg> {
  return svc.request("turn.start", { prompt }, sessionId !== undefined ? { session_id: sessionId } : {}, requestId);
}
