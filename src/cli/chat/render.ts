/**
 * Terminal rendering for `berth chat`: compact activity status lines, the context gauge, the no-provider help.
 * Pure string functions (no I/O) so they are testable and shared by interactive and one-shot modes.
 */
import type { Activity, LoginTerminal, TurnTerminal } from "../../client/app-service/index.js";

export interface Style {
  dim(s: string): string;
  bold(s: string): string;
  red(s: string): string;
  green(s: string): string;
}

export function style(enabled: boolean): Style {
  const wrap = (a: number, b: number) => (s: string) => (enabled ? `\x1b[${a}m${s}\x1b[${b}m` : s);
  return { dim: wrap(2, 22), bold: wrap(1, 22), red: wrap(31, 39), green: wrap(32, 39) };
}

/** One status line for an activity, or null when it is not worth a line (context/usage feed the gauge instead). */
export function activityLine(a: Activity): string | null {
  switch (a.kind) {
    case "tool":
      return `tool ${a.tool_name ?? (a.transport === "mcp" ? "mcp tool" : "tool")} ${a.status}${a.timed_out === true ? " (timed out)" : ""}`;
    case "lifecycle":
      if (a.category === "subagent_task" || a.category === "subagent_batch")
        return `${a.category === "subagent_batch" ? "subagents" : "subagent"} ${a.status}`;
      // Tool, assistant and compaction lifecycles repeat what the tool / compaction activities already show.
      return null;
    case "compaction":
      return `compaction ${a.status}${a.current_tokens !== null && a.max_tokens !== null ? ` (${tokens(a.current_tokens)}/${tokens(a.max_tokens)})` : ""}`;
    case "reasoning_summary":
      return a.text.length > 0 ? `thinking: ${oneLine(a.text, 100)}` : null;
    case "context":
    case "usage":
      return null;
  }
}

export function tokens(n: number): string {
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

function oneLine(s: string, max: number): string {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length > max ? t.slice(0, max - 1) + "…" : t;
}

/** `ctx [███░░░░░░░] 31% 10k/32k` */
export function gauge(current: number, max: number, width = 10): string {
  if (max <= 0) return "";
  const frac = Math.min(1, current / max);
  const full = Math.round(frac * width);
  return `ctx [${"█".repeat(full)}${"░".repeat(width - full)}] ${Math.round(frac * 100)}% ${tokens(current)}/${tokens(max)}`;
}

/**
 * The chat's footer: `model · cwd · ctx gauge · session` (`new session` before one is open). When that is wider
 * than `cols`, the cwd is cut to its last part (`…/name`), then the gauge to its percentage.
 */
export function footerLine(f: { model: string | null; cwd: string; ctx: { current: number; max: number } | null; ctxMax: number | null; session: string | null }, cols = Infinity): string {
  const cur = f.ctx?.current ?? 0;
  const max = f.ctx?.max ?? f.ctxMax;
  const g = max !== null ? gauge(cur, max) : "ctx –";
  const short = max !== null && max > 0 ? `ctx ${Math.round(Math.min(1, cur / max) * 100)}%` : "ctx –";
  const last = f.cwd.split("/").filter((x) => x !== "").at(-1);
  const cwdShort = last === undefined ? f.cwd : `…/${last}`;
  const line = (cwd: string, gg: string): string => `${f.model ?? "no model"} · ${cwd} · ${gg} · ${f.session !== null ? f.session.slice(0, 12) : "new session"}`;
  const tries = [line(f.cwd, g), line(cwdShort, g), line(cwdShort, short)];
  return tries.find((t) => [...t].length <= cols) ?? tries.at(-1)!;
}

export function terminalLine(t: TurnTerminal): string {
  const extra = t.activity_dropped > 0 ? ` · ${t.activity_dropped} activity updates dropped` : "";
  return `${t.status}${extra}`;
}

const LOGIN_FAILURES: Record<string, string> = {
  callback_timeout: "no redirect arrived in time",
  callback_failed: "that redirect URL or code does not belong to this sign-in (paste the one from the latest /login), or the sign-in was refused",
  exchange_failed: "the code could not be exchanged for a token (it may have expired or been used already)",
  auth_changed: "the saved credential changed during the sign-in (another login or a logout)",
  storage_failed: "the credential could not be saved; check that your Berth home is writable",
  internal_error: "an internal error stopped it",
};

/** The line that ends a `/login`: success, cancellation, or the failure with what to do about it. */
export function loginEndLine(t: LoginTerminal): string {
  if (t.state === "exchange_succeeded") return `Signed in to ${t.provider_id}.`;
  const hint = LOGIN_FAILURES[t.state];
  if (hint === undefined) return `Sign-in ended: ${t.state.replace(/_/g, " ")}.`;
  return `Sign-in failed (${t.state.replace(/_/g, " ")}): ${hint}. Type /login to try again.`;
}

export const NO_PROVIDER_HELP = `No model provider is ready. Fix it in one of these ways:
  - Anthropic: set ANTHROPIC_API_KEY in your environment and start berth chat again.
  - OpenAI Codex (ChatGPT sign-in): run berth chat and type /login.
  - A local OpenAI-compatible server such as Ollama: add it to settings.json in your Berth home
    ($MC_HOME, default ~/.berth), for example
      {"provider":"ollama","model":"llama3.2","providers":{"ollama":{"api":"openai-chat","base_url":"http://127.0.0.1:11434/v1","auth":"none","models":[{"id":"llama3.2"}]}}}
    and start berth chat again ("provider" and "model" select it; MC_PROVIDER and MC_MODEL override them).
`;

export const HELP = `Commands:
  /new               start a new conversation
  /sessions          list the 10 latest sessions, newest first, with their directory and title
  /resume <n|id>     continue a session (list number, full ID or a unique prefix) in its own directory
  /model [id|n]      list models of the current provider, or switch to one (saved globally)
  /model <provider> <model>   switch provider and model
  /tools             list the session's tools (and which ask for approval)
  /mcp               list the session's MCP servers and their state
  /login [provider]  sign in (default openai-codex); paste the redirect URL or code when asked
  /logout [provider] remove a provider's saved credential
  /help              this help
  /exit              quit
Shift-Enter (or a line ending in \\) continues the prompt on the next line; Enter sends it.
Ctrl-C cancels a running turn; a second Ctrl-C exits.
`;
