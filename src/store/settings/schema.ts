/**
 * The settings document (`$MC_HOME/settings.json` global, `<launch cwd>/.berth/settings.json` project).
 * Strict on the fields Berth owns, tolerant of unknown top-level fields (they are preserved on write).
 * Validated with store/validate.ts (zod v3 semantics and messages for this subset; zod itself stays off the
 * first-turn path).
 */
import { THINKING_LEVELS } from "../../core/thinking.js";
import { arr, bool, dflt, num, obj, oneOf, opt, rec, str, lit, type V } from "../validate.js";

export type ThinkingLevelValue = (typeof THINKING_LEVELS)[number];

export interface ModelDef {
  id: string;
  label?: string | undefined;
  context_window?: number | undefined;
  max_output_tokens?: number | undefined;
  thinking_levels?: ThinkingLevelValue[] | undefined;
  disabled?: boolean | undefined;
  images?: boolean | undefined;
}

export interface ProviderDef {
  api: "openai-chat" | "openai-responses" | "anthropic";
  base_url: string;
  api_key_env?: string | undefined;
  auth?: "none" | undefined;
  label?: string | undefined;
  models: ModelDef[];
  /** A response that sends nothing this long (ms) is cut off and the turn fails (default 300,000: 5 minutes). */
  stream_idle_timeout_ms?: number | undefined;
}

export interface McpServerDef {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * Tool policy (honoured from the global settings only: a project's own settings cannot loosen it).
 * - `file_access`: "workspace" (default) confines file tools to the session's workspace plus `allowed_dirs`;
 *   "unrestricted" lets them use any path (Berth's state root stays unwritable either way).
 * - `sandbox`: "bubblewrap" runs `bash` inside bubblewrap (workspace read-write, the rest read-only).
 * - `secret_env_patterns`: case-insensitive `*` globs of variable names removed from every tool environment;
 *   replaces the default list (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`).
 */
export interface ToolSettings {
  file_access?: "workspace" | "unrestricted" | undefined;
  allowed_dirs?: string[] | undefined;
  sandbox?: "none" | "bubblewrap" | undefined;
  secret_env_patterns?: string[] | undefined;
}

export interface Settings {
  providers?: Record<string, ProviderDef> | undefined;
  mcp_servers?: Record<string, McpServerDef> | undefined;
  /** The spelling other agents use: an alias of `mcp_servers` (which wins when both are present). */
  mcpServers?: Record<string, McpServerDef> | undefined;
  provider?: string | undefined;
  model?: string | undefined;
  thinking_level?: ThinkingLevelValue | undefined;
  fast?: boolean | undefined;
  tools?: ToolSettings | undefined;
  /** When tools ask first (`approvalPolicyOf` in effective.ts: a project may only make it stricter). */
  approval_policy?: ApprovalPolicySetting | undefined;
  /** `web_fetch` runs https URLs on these hosts without asking (read from the global settings only). */
  web_fetch?: { auto_approve_hosts: string[] } | undefined;
  [key: string]: unknown;
}

/** `approval_policy` values, loosest first: `never` asks nothing, `on-risk` (the default) asks before anything not
 * read-only, `always` asks before every tool call. */
export const APPROVAL_POLICIES = ["never", "on-risk", "always"] as const;
export type ApprovalPolicySetting = (typeof APPROVAL_POLICIES)[number];

/** The six wire reasoning values (core/thinking.ts). */
export const ThinkingLevelSchema: V<ThinkingLevelValue> = oneOf(THINKING_LEVELS);

export const ModelDefSchema = obj<ModelDef>({
  id: str({ min: 1 }),
  label: opt(str()),
  context_window: opt(num({ int: true, positive: true })),
  max_output_tokens: opt(num({ int: true, positive: true })),
  thinking_levels: opt(arr(ThinkingLevelSchema)),
  disabled: opt(bool()),
  images: opt(bool()),
});

/** Bounds of a provider's `stream_idle_timeout_ms`: one second to one hour. */
export const STREAM_IDLE_TIMEOUT_MIN_MS = 1000;
export const STREAM_IDLE_TIMEOUT_MAX_MS = 3_600_000;

export const ProviderDefSchema = obj<ProviderDef>({
  api: oneOf(["openai-chat", "openai-responses", "anthropic"] as const),
  base_url: str({ url: true }).refine((u) => /^https?:\/\//i.test(u), "must be an http:// or https:// URL, such as http://127.0.0.1:8080/v1"),
  api_key_env: opt(str({ min: 1 })),
  auth: opt(lit("none")),
  label: opt(str()),
  models: dflt(arr(ModelDefSchema), () => []),
  stream_idle_timeout_ms: opt(num({ int: true, min: STREAM_IDLE_TIMEOUT_MIN_MS, max: STREAM_IDLE_TIMEOUT_MAX_MS })),
}).refine((p) => (p.api_key_env === undefined) !== (p.auth === undefined), 'exactly one of api_key_env or auth:"none"');

export const McpServerDefSchema = obj<McpServerDef>({
  command: str({ min: 1 }),
  args: dflt(arr(str()), () => []),
  env: dflt(rec(str()), () => ({})),
});

export const ToolSettingsSchema = obj<ToolSettings>({
  file_access: opt(oneOf(["workspace", "unrestricted"] as const)),
  allowed_dirs: opt(arr(str({ min: 1 }).refine((d) => d.startsWith("/") || d.startsWith("~/"), "absolute path or ~/…"))),
  sandbox: opt(oneOf(["none", "bubblewrap"] as const)),
  secret_env_patterns: opt(arr(str({ min: 1, max: 256 }), { max: 256 })),
});

export const SettingsSchema = obj<Settings>(
  {
    providers: opt(rec(ProviderDefSchema)),
    mcp_servers: opt(rec(McpServerDefSchema)),
    mcpServers: opt(rec(McpServerDefSchema)),
    provider: opt(str()),
    model: opt(str()),
    thinking_level: opt(ThinkingLevelSchema),
    fast: opt(bool()),
    approval_policy: opt(oneOf(APPROVAL_POLICIES)),
    tools: opt(ToolSettingsSchema),
    web_fetch: opt(obj<{ auto_approve_hosts: string[] }>({ auto_approve_hosts: dflt(arr(str({ min: 1, max: 253, regex: /^[A-Za-z0-9.-]+$/ }), { max: 64 }), () => []) }, "strict")),
  },
  "passthrough",
);
