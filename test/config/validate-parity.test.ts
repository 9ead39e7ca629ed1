/**
 * The settings, auth and catalog documents are validated by store/validate.ts instead of zod v3 (zod cost more to
 * load than a first turn's settings read; issue 19). zod v3 (still installed for the host) is the oracle here: for
 * each document both accept or both refuse, with the same cleaned output (defaults, stripped or kept unknown keys)
 * or the same first issue (path and message, which `berth chat` prints).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod/v3";
import { THINKING_LEVELS } from "../../src/core/thinking.js";
import { SettingsSchema } from "../../src/store/settings/schema.js";
import { OAuthRecordSchema } from "../../src/store/auth/auth-store.js";

// The zod v3 schema the settings store used before (kept verbatim as the oracle).
const Level = z.enum(THINKING_LEVELS);
const ModelDef = z.object({
  id: z.string().min(1),
  label: z.string().optional(),
  context_window: z.number().int().positive().optional(),
  max_output_tokens: z.number().int().positive().optional(),
  thinking_levels: z.array(Level).optional(),
  disabled: z.boolean().optional(),
  images: z.boolean().optional(),
});
const ProviderDef = z
  .object({
    api: z.enum(["openai-chat", "openai-responses", "anthropic"]),
    base_url: z.string().url().refine((u) => /^https?:\/\//i.test(u), { message: "must be an http:// or https:// URL, such as http://127.0.0.1:8080/v1" }),
    api_key_env: z.string().min(1).optional(),
    auth: z.literal("none").optional(),
    label: z.string().optional(),
    models: z.array(ModelDef).default([]),
    stream_idle_timeout_ms: z.number().int().min(1000).max(3_600_000).optional(),
  })
  .refine((p) => (p.api_key_env === undefined) !== (p.auth === undefined), { message: 'exactly one of api_key_env or auth:"none"' });
const McpServerDef = z.object({ command: z.string().min(1), args: z.array(z.string()).default([]), env: z.record(z.string(), z.string()).default({}) });
const ZodSettings = z
  .object({
    providers: z.record(z.string(), ProviderDef).optional(),
    mcp_servers: z.record(z.string(), McpServerDef).optional(),
    mcpServers: z.record(z.string(), McpServerDef).optional(),
    provider: z.string().optional(),
    model: z.string().optional(),
    thinking_level: Level.optional(),
    fast: z.boolean().optional(),
    approval_policy: z.enum(["never", "on-risk", "always"]).optional(),
    tools: z
      .object({
        file_access: z.enum(["workspace", "unrestricted"]).optional(),
        allowed_dirs: z.array(z.string().min(1).refine((d) => d.startsWith("/") || d.startsWith("~/"), { message: "absolute path or ~/…" })).optional(),
        sandbox: z.enum(["none", "bubblewrap"]).optional(),
        secret_env_patterns: z.array(z.string().min(1).max(256)).max(256).optional(),
      })
      .optional(),
    web_fetch: z
      .object({ auto_approve_hosts: z.array(z.string().min(1).max(253).regex(/^[A-Za-z0-9.-]+$/)).max(64).default([]) })
      .strict()
      .optional(),
  })
  .passthrough();

const okProvider = { api: "openai-chat", base_url: "http://127.0.0.1:1/v1", auth: "none" };
const DOCS: Array<[string, unknown]> = [
  ["empty", {}],
  ["full", { providers: { p: { ...okProvider, label: "P", models: [{ id: "m", context_window: 1000, thinking_levels: ["low", "max"], images: true }] } }, provider: "p", model: "m", thinking_level: "high", fast: false, tools: { file_access: "unrestricted", allowed_dirs: ["/x", "~/y"], sandbox: "none", secret_env_patterns: ["*A*"] }, web_fetch: { auto_approve_hosts: ["example.com"] } }],
  ["unknown top-level kept, unknown provider key stripped", { approval_policy: "never", agent: { max_delegation_depth: 3 }, providers: { p: { ...okProvider, headers: { a: "b" } } } }],
  ["defaults filled", { mcpServers: { s: { command: "srv" } }, web_fetch: {} }],
  ["bad enum", { providers: { fake: { ...okProvider, api: "openai-chatt" } } }],
  ["missing command", { mcpServers: { fixture: { args: [] } } }],
  ["not a url", { providers: { p: { ...okProvider, base_url: "not a url" } } }],
  ["ftp url", { providers: { p: { ...okProvider, base_url: "ftp://example" } } }],
  ["both auth forms", { providers: { p: { ...okProvider, api_key_env: "K" } } }],
  ["neither auth form", { providers: { p: { api: "anthropic", base_url: "https://a.example" } } }],
  ["strict web_fetch", { web_fetch: { auto_approve_hosts: [], extra: 1 } }],
  ["bad host", { web_fetch: { auto_approve_hosts: ["a b"] } }],
  ["too many hosts", { web_fetch: { auto_approve_hosts: Array.from({ length: 65 }, (_, i) => `h${i}.example`) } }],
  ["relative allowed dir", { tools: { allowed_dirs: ["rel"] } }],
  ["empty pattern", { tools: { secret_env_patterns: [""] } }],
  ["bad level", { thinking_level: "extreme" }],
  ["bad approval policy", { approval_policy: "sometimes" }],
  ["approval policy not a string", { approval_policy: true }],
  ["float window", { providers: { p: { ...okProvider, models: [{ id: "m", context_window: 1.5 }] } } }],
  ["zero window", { providers: { p: { ...okProvider, models: [{ id: "m", max_output_tokens: 0 }] } } }],
  ["empty model id", { providers: { p: { ...okProvider, models: [{ id: "" }] } } }],
  ["idle timeout at its lower bound", { providers: { p: { ...okProvider, stream_idle_timeout_ms: 1000 } } }],
  ["idle timeout one under its lower bound", { providers: { p: { ...okProvider, stream_idle_timeout_ms: 999 } } }],
  ["idle timeout at its upper bound", { providers: { p: { ...okProvider, stream_idle_timeout_ms: 3_600_000 } } }],
  ["idle timeout one past its upper bound", { providers: { p: { ...okProvider, stream_idle_timeout_ms: 3_600_001 } } }],
  ["idle timeout not an integer", { providers: { p: { ...okProvider, stream_idle_timeout_ms: 1500.5 } } }],
  ["wrong type", { fast: "yes" }],
  ["null provider", { provider: null }],
  ["array providers", { providers: [] }],
  ["env value not a string", { mcp_servers: { s: { command: "c", env: { A: 1 } } } }],
];

for (const [name, doc] of DOCS) {
  test(`settings validation matches zod v3: ${name}`, () => {
    const ours = SettingsSchema.safeParse(structuredClone(doc));
    const theirs = ZodSettings.safeParse(structuredClone(doc));
    assert.equal(ours.success, theirs.success, `accepts alike (${JSON.stringify(theirs.success ? null : theirs.error.issues[0])})`);
    if (ours.success && theirs.success) assert.deepEqual(ours.data, theirs.data);
    if (!ours.success && !theirs.success) {
      const z0 = theirs.error.issues[0]!;
      assert.deepEqual({ path: ours.error.issues[0]!.path, message: ours.error.issues[0]!.message }, { path: z0.path, message: z0.message });
    }
  });
}

test("auth records: the OAuth record's shape is checked as before", () => {
  const good = { type: "oauth", access: "a", refresh: null, expires_at: 5, account_id: "x" };
  assert.deepEqual(OAuthRecordSchema.parse({ ...good, extra: 1 }), good);
  for (const bad of [{ ...good, access: "" }, { ...good, expires_at: -1 }, { ...good, expires_at: 1.5 }, { ...good, type: "api_key" }, { ...good, refresh: undefined }])
    assert.equal(OAuthRecordSchema.safeParse(bad).success, false, JSON.stringify(bad));
  assert.throws(() => OAuthRecordSchema.parse({}), (e: Error) => e.name === "ValidationError" && !e.message.includes("oauth"));
});

test("a provider's stream_idle_timeout_ms is an integer from 1,000 to 3,600,000 (at and one past each bound)", () => {
  const ok = { api: "openai-chat", base_url: "http://127.0.0.1:1/v1", auth: "none" };
  for (const [v, accepted] of [[1000, true], [999, false], [3_600_000, true], [3_600_001, false], [1000.5, false], ["1000", false]] as const) {
    const r = SettingsSchema.safeParse({ providers: { p: { ...ok, stream_idle_timeout_ms: v } } });
    assert.equal(r.success, accepted, `${JSON.stringify(v)}: ${r.success ? "accepted" : r.error.issues[0]!.message}`);
  }
});
