/**
 * The settings document (`$MC_HOME/settings.json` global, `<launch cwd>/.berth/settings.json` project).
 * Strict on the fields Berth owns, tolerant of unknown top-level fields (they are preserved on write).
 */
import { THINKING_LEVELS } from "../../core/thinking.js";
import { z } from "zod/v3";

/** The six wire reasoning values (core/thinking.ts). */
export const ThinkingLevelSchema = z.enum(THINKING_LEVELS);

export const ModelDefSchema = z.object({
  id: z.string().min(1),
  label: z.string().optional(),
  context_window: z.number().int().positive().optional(),
  max_output_tokens: z.number().int().positive().optional(),
  thinking_levels: z.array(ThinkingLevelSchema).optional(),
  disabled: z.boolean().optional(),
  images: z.boolean().optional(),
});

export const ProviderDefSchema = z
  .object({
    api: z.enum(["openai-chat", "openai-responses", "anthropic"]),
    base_url: z.string().url().refine((u) => /^https?:\/\//i.test(u), { message: "http(s) URL" }),
    api_key_env: z.string().min(1).optional(),
    auth: z.literal("none").optional(),
    label: z.string().optional(),
    models: z.array(ModelDefSchema).default([]),
  })
  .refine((p) => (p.api_key_env === undefined) !== (p.auth === undefined), {
    message: "exactly one of api_key_env or auth:\"none\"",
  });

export const McpServerDefSchema = z.object({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).default({}),
});

/**
 * Tool policy (honoured from the global settings only: a project's own settings cannot loosen it).
 * - `file_access`: "workspace" (default) confines file tools to the session's workspace plus `allowed_dirs`;
 *   "unrestricted" lets them use any path (Berth's state root stays unwritable either way).
 * - `sandbox`: "bubblewrap" runs `bash` inside bubblewrap (workspace read-write, the rest read-only).
 * - `secret_env_patterns`: case-insensitive `*` globs of variable names removed from every tool environment;
 *   replaces the default list (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`).
 */
export const ToolSettingsSchema = z.object({
  file_access: z.enum(["workspace", "unrestricted"]).optional(),
  allowed_dirs: z.array(z.string().min(1).refine((d) => d.startsWith("/") || d.startsWith("~/"), { message: "absolute path or ~/…" })).optional(),
  sandbox: z.enum(["none", "bubblewrap"]).optional(),
  secret_env_patterns: z.array(z.string().min(1).max(256)).max(256).optional(),
});

export const SettingsSchema = z
  .object({
    providers: z.record(z.string(), ProviderDefSchema).optional(),
    mcp_servers: z.record(z.string(), McpServerDefSchema).optional(),
    /** The spelling other agents use: an alias of `mcp_servers` (which wins when both are present). */
    mcpServers: z.record(z.string(), McpServerDefSchema).optional(),
    provider: z.string().optional(),
    model: z.string().optional(),
    thinking_level: ThinkingLevelSchema.optional(),
    fast: z.boolean().optional(),
    tools: ToolSettingsSchema.optional(),
    /** `web_fetch` runs https URLs on these hosts without asking (read from the global settings only). */
    web_fetch: z
      .object({ auto_approve_hosts: z.array(z.string().min(1).max(253).regex(/^[A-Za-z0-9.-]+$/)).max(64).default([]) })
      .strict()
      .optional(),
  })
  .passthrough();

export type ThinkingLevelValue = z.infer<typeof ThinkingLevelSchema>;
export type ModelDef = z.infer<typeof ModelDefSchema>;
export type ProviderDef = z.infer<typeof ProviderDefSchema>;
export type McpServerDef = z.infer<typeof McpServerDefSchema>;
export type Settings = z.infer<typeof SettingsSchema>;
export type ToolSettings = z.infer<typeof ToolSettingsSchema>;
