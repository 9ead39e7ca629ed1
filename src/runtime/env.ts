/**
 * The environment handed to tool child processes (bash, MCP servers). Contract: provider credentials and Berth's
 * own configuration never reach a tool: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, every configured `api_key_env`,
 * and every `MC_*` / `BERTH_*` variable are removed. Everything else is inherited.
 */
export const STRIPPED_KEYS = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN"] as const;

export function cleanToolEnv(env: Readonly<Record<string, string | undefined>>, extraKeys: Iterable<string> = []): NodeJS.ProcessEnv {
  const drop = new Set<string>([...STRIPPED_KEYS, ...extraKeys]);
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || drop.has(k) || k.startsWith("MC_") || k.startsWith("BERTH_")) continue;
    out[k] = v;
  }
  return out;
}
