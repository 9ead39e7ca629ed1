/**
 * The environment handed to tool child processes (bash, MCP servers). Contract: credentials and Berth's own
 * configuration never reach a tool. Removed are: every variable whose name matches one of the secret patterns
 * (case-insensitive `*` globs; default `SECRET_ENV_PATTERNS`, replaceable in settings `tools.secret_env_patterns`),
 * the fixed provider names in `STRIPPED_KEYS`, every configured `api_key_env`, and every `MC_*` / `BERTH_*`
 * variable. Everything else is inherited.
 */
import { SECRET_ENV_PATTERNS, secretNameMatcher } from "../core/secret-names.js";

export const STRIPPED_KEYS = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN"] as const;

export { SECRET_ENV_PATTERNS, secretNameMatcher } from "../core/secret-names.js";

export function cleanToolEnv(
  env: Readonly<Record<string, string | undefined>>,
  extraKeys: Iterable<string> = [],
  patterns: readonly string[] = SECRET_ENV_PATTERNS,
): NodeJS.ProcessEnv {
  const drop = new Set<string>([...STRIPPED_KEYS, ...extraKeys]);
  const secret = secretNameMatcher(patterns);
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || drop.has(k) || k.startsWith("MC_") || k.startsWith("BERTH_") || secret(k)) continue;
    out[k] = v;
  }
  return out;
}
