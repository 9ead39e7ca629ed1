/** Shared helpers for provider tests: a provider pointed at the fake, event collection, a base request. */
import { createProvider, type RetryPolicy } from "../../src/runtime/providers/index.js";
import type { CredentialSource, Provider, ProviderApi, ProviderEvent, ProviderRequest } from "../../src/runtime/types.js";
import type { FakeProvider } from "../fakes/fake-provider.js";

export const APIS: ProviderApi[] = ["anthropic", "openai-responses", "openai-chat"];
export const SECRET_KEY = "sk-test-SECRETMARKER-0123456789";

export const apiKey: CredentialSource = () => Promise.resolve({ kind: "api_key", value: SECRET_KEY });

/** Base URL the provider module expects for the fake (OpenAI-style bases include /v1). */
export function baseFor(api: ProviderApi, fake: FakeProvider): string {
  return api === "anthropic" ? fake.baseUrl : `${fake.baseUrl}/v1`;
}

export interface Made {
  provider: Provider;
  delays: number[];
}

/** A provider for `api` against the fake; retry sleeps are recorded and resolve at once. */
export function makeProvider(
  api: ProviderApi,
  fake: FakeProvider,
  opts: { credentials?: CredentialSource; retry?: Partial<RetryPolicy>; headers?: Record<string, string>; baseUrl?: string; idleTimeoutMs?: number } = {},
): Made {
  const delays: number[] = [];
  const provider = createProvider(
    `test-${api}`,
    {
      api,
      baseUrl: opts.baseUrl ?? baseFor(api, fake),
      ...(opts.headers !== undefined ? { headers: opts.headers } : {}),
      ...(opts.idleTimeoutMs !== undefined ? { idleTimeoutMs: opts.idleTimeoutMs } : {}),
    },
    opts.credentials ?? apiKey,
    {
      retry: {
        sleep: (ms, signal) => {
          delays.push(ms);
          return signal.aborted ? Promise.reject(new Error("aborted")) : Promise.resolve();
        },
        ...opts.retry,
      },
      env: {},
    },
  );
  return { provider, delays };
}

export function request(overrides: Partial<ProviderRequest> = {}): ProviderRequest {
  return {
    model: "fake-model",
    system: "You are a test.",
    messages: [{ role: "user", content: [{ type: "text", text: "hello" }] }],
    tools: [],
    signal: new AbortController().signal,
    ...overrides,
  };
}

export async function collect(stream: AsyncIterable<ProviderEvent>): Promise<ProviderEvent[]> {
  const out: ProviderEvent[] = [];
  for await (const ev of stream) out.push(ev);
  return out;
}

export function textOf(events: ProviderEvent[]): string {
  return events.map((e) => (e.type === "text_delta" ? e.text : "")).join("");
}

export function terminal(events: ProviderEvent[]): ProviderEvent | undefined {
  return events[events.length - 1];
}

/** Asserts the contract: exactly one terminal event, and it is last. */
export function terminalCount(events: ProviderEvent[]): number {
  return events.filter((e) => e.type === "done" || e.type === "error").length;
}
