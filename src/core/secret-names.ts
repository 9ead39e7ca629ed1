/**
 * Which environment variable names look like credentials, and the text form in which Berth hands such variables
 * to a child Berth process without putting them in its exec-time environment (docs/security.md). Pure.
 */

/** Default name patterns (case-insensitive `*` globs); settings `tools.secret_env_patterns` may replace them for tools. */
export const SECRET_ENV_PATTERNS = ["*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*CREDENTIAL*"] as const;

/** The variable naming the descriptor that carries handed-over credentials. */
export const HANDOFF_ENV = "BERTH_HANDOFF_FD";
/**
 * Whom a handoff is for: the PID of the process that reads it (`BERTH_HANDOFF_PID`, set by the launchers, which
 * `exec` node in place) or of the Berth process that started it (`BERTH_HANDOFF_PPID`, set by `credentialHandoff`).
 * A `BERTH_HANDOFF_FD` inherited from elsewhere names neither, and its descriptor is left alone (never read: a
 * pipe nobody closes would hang start-up).
 */
export const HANDOFF_PID_ENV = "BERTH_HANDOFF_PID";
export const HANDOFF_PARENT_ENV = "BERTH_HANDOFF_PPID";
const HANDOFF_VARS = new Set([HANDOFF_ENV, HANDOFF_PID_ENV, HANDOFF_PARENT_ENV]);

/** A case-insensitive matcher for `*` globs over variable names. */
export function secretNameMatcher(patterns: readonly string[] = SECRET_ENV_PATTERNS): (name: string) => boolean {
  if (patterns.length === 0) return () => false;
  const esc = (s: string): string => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  const re = new RegExp(`^(?:${patterns.map((p) => p.split("*").map(esc).join(".*")).join("|")})$`, "i");
  return (name) => re.test(name);
}

/**
 * Splits `env` for a child Berth process: its environment without credential-like variables (plus
 * `BERTH_HANDOFF_FD=3` and `BERTH_HANDOFF_PPID=<parentPid>` when any were removed) and the `export -p`-style text to
 * write on its descriptor 3. `parentPid`: the PID of the process that starts the child (default this one).
 */
export function credentialHandoff(
  env: Readonly<Record<string, string | undefined>>,
  parentPid: number = process.pid,
): { env: Record<string, string>; handoff: string | null } {
  const secret = secretNameMatcher();
  const out: Record<string, string> = {};
  let handoff = "";
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || HANDOFF_VARS.has(k)) continue;
    if (secret(k) && /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) handoff += `export ${k}='${v.replace(/'/g, `'"'"'`)}'\n`;
    else out[k] = v;
  }
  if (handoff === "") return { env: out, handoff: null };
  out[HANDOFF_ENV] = "3";
  out[HANDOFF_PARENT_ENV] = String(parentPid);
  return { env: out, handoff };
}
