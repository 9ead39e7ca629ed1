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

export const SettingsSchema = z
  .object({
    providers: z.record(z.string(), ProviderDefSchema).optional(),
    mcp_servers: z.record(z.string(), McpServerDefSchema).optional(),
    provider: z.string().optional(),
    model: z.string().optional(),
    thinking_level: ThinkingLevelSchema.optional(),
    fast: z.boolean().optional(),
  })
  .passthrough();

export type ThinkingLevelValue = z.infer<typeof ThinkingLevelSchema>;
export type ModelDef = z.infer<typeof ModelDefSchema>;
export type ProviderDef = z.infer<typeof ProviderDefSchema>;
export type McpServerDef = z.infer<typeof McpServerDefSchema>;
export type Settings = z.infer<typeof SettingsSchema>;
