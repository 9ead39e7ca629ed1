/**
 * The interactive chat's start: the banner (how it is connected, model and cwd, `--yolo`, a setup problem named in
 * one line, or returned for piped prompts to say once on stderr) and the question whether to trust this project's own
 * MCP servers (remembered once answered yes).
 * The model named is the one the chat's sessions run (selection.ts): the user's choice here (`MC_PROVIDER` /
 * `MC_MODEL`, carried in every `session.start`), else, through a daemon, the daemon's selection (`daemon.status`),
 * else the settings' as this chat resolves them (a `berth stdio` child or the in-process server resolve the same).
 */
import { join } from "node:path";
import type { McpDef } from "./project.js";
import { describeServers, projectMcp, trustProject } from "./project.js";
import { preflight } from "./preflight.js";
import { NO_PROVIDER_HELP, type Style } from "./render.js";
import type { Screen } from "./screen.js";
import { terminalSafe } from "../terminal-safe.js";
import { named, type Ran } from "./reconnected.js";
import { chosenHere, type Chosen } from "./selection.js";

export interface BannerHost {
  readonly screen: Screen;
  readonly s: Style;
  readonly home: string;
  readonly cwd: string;
  readonly yolo: boolean;
  /** Prompts come from a pipe: a setup error is returned (for the chat to say once and stop), not shown. */
  readonly piped: boolean;
  /** `daemon` or `stdio` (null: not connected yet). */
  via(): Promise<string | null>;
  /** Why the daemon's socket reached no daemon, with the fix (link.ts `note`), or null. */
  note(): Promise<string | null>;
  /** What the daemon serving the chat runs for a session that names no selection (null: not a daemon, or unknown). */
  daemonSelection(): Promise<{ provider: string; model: string | null } | null>;
  question(text: string): Promise<string>;
}

export interface Startup {
  /** `--yolo`, or `approval_policy: "never"` in settings. */
  yolo: boolean;
  baseUrl: string | null;
  /** `provider/model` as the chat's sessions run it, or null when no provider is ready. */
  model: string | null;
  /** That, as a pair: what the daemon runs through one, else the chat's own resolution (`own`). */
  runs: Ran | null;
  /** What a server of this chat's own (`berth stdio`) runs: the user's choice here, else the settings' as resolved here. */
  own: Ran | null;
  /** The selection the user chose here, which every session carries (null: the server's applies). */
  chosen: Chosen | null;
  /** The MCP servers this chat's sessions get (for the startup report). */
  mcpConfig: Record<string, McpDef>;
  /** The session's MCP servers when the trusted project adds its own (global ∪ project); null: the settings'. */
  sessionMcp: Record<string, McpDef> | null;
  /** What is wrong with the setup (text ending in a newline), or null. */
  setupError: string | null;
}

export async function banner(h: BannerHost): Promise<Startup> {
  const { screen, s } = h;
  const status = (t: string): void => screen.line(s.dim(`  · ${t}`));
  // A key missing here may be set where a daemon runs the turns.
  const pre = await preflight(process.env, h.cwd, { keyHere: async () => (await h.via()) !== "daemon" });
  const yolo = h.yolo || (pre.ok && pre.approvalPolicy === "never");
  const via = await h.via();
  const chosen = pre.ok ? chosenHere(process.env, pre) : null;
  const served = pre.ok && chosen === null && via === "daemon" ? await h.daemonSelection() : null;
  const own = pre.ok ? { provider: pre.provider, model: pre.model } : null;
  const runs = served ?? own;
  const model = runs !== null ? named(runs) : null;
  screen.line(s.bold("berth chat") + s.dim(` — /help for commands, Ctrl-C to cancel${via === "daemon" ? " · via berth daemon" : ""}`));
  const note = await h.note();
  if (note !== null) status(terminalSafe(note, false));
  if (model !== null) status(terminalSafe(`model ${model} · ${h.cwd}`, false));
  if (yolo) screen.line(s.red("--yolo: every tool call is approved without asking"));
  if (pre.ok && pre.approvalNote !== null) screen.line(s.bold(`note: ${pre.approvalNote}`));
  if (!pre.ok && !h.piped) screen.line(pre.noProvider ? NO_PROVIDER_HELP.trimEnd() : s.red(`error: ${pre.message}`));
  const global = (pre.ok ? pre.layers.global.mcp_servers : undefined) ?? {};
  const setupError = pre.ok ? null : pre.noProvider ? NO_PROVIDER_HELP : `${pre.message}\n`;
  const out: Startup = { yolo, baseUrl: pre.ok ? pre.baseUrl : null, model, runs, own, chosen, mcpConfig: global, sessionMcp: null, setupError };
  // Piped prompts stop at a setup error: no line may be taken as an answer to the trust question first.
  if (setupError !== null && h.piped) return out;
  const proj = await projectMcp(h.home, h.cwd);
  if (proj === null) return out;
  let trusted = proj.trusted;
  if (!trusted) {
    screen.line(terminalSafe(`This project (${join(h.cwd, ".berth", "settings.json")}) declares MCP servers:`, false));
    for (const l of describeServers(proj.servers)) screen.line(l);
    const answer = await h.question("Trust this project and start them (remembered)? [y/N] › ");
    trusted = answer === "y" || answer === "yes";
    if (trusted) await trustProject(h.home, h.cwd, proj.fingerprint).catch(() => undefined);
    status(trusted ? "project trusted; its MCP servers start with the session" : "project MCP servers not started (asked again next time)");
  }
  if (trusted) {
    out.sessionMcp = { ...global, ...proj.servers };
    out.mcpConfig = out.sessionMcp;
  }
  return out;
}
