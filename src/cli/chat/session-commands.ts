/**
 * The interactive chat's session and tool commands: /sessions (recent saved sessions), /resume (show a stored
 * session's history, then continue it), /tools and /mcp (the running session's tools and MCP servers, asked over SCV:
 * session-tools.ts), and the report of the session's MCP servers that failed to start, made once per session as
 * soon as it started (the chat starts its session with the first prompt, /resume, /tools or /mcp). The chat loop
 * (interactive.ts) owns the connection and the terminal.
 */
import { ScvRequestError, type ScvClient } from "../../client/scv/client.js";
import type { McpDef } from "./project.js";
import type { Style } from "./render.js";
import { historyLines, movedWorkspaceNote, SessionsView, type SessionRow } from "./sessions.js";
import { askUntil, serverLines, sessionTools, settle, toolLines } from "./session-tools.js";
import type { OpenSession } from "./turn-events.js";
import { terminalSafe } from "../terminal-safe.js";

/** How long `/mcp` and `/tools` wait for servers still starting before showing them as `starting`. */
const SHOW_WAIT_MS = 5_000;
/** How long the failure report follows a session's starting servers (beyond the runtime's 30 s connect budget). */
const REPORT_WAIT_MS = 35_000;

/** What these commands need from the chat loop. */
export interface SessionCommandsHost {
  readonly s: Style;
  readonly cwd: string;
  line(text: string): void;
  status(text: string): void;
  session(): OpenSession | null;
  mcpConfig(): Record<string, McpDef>;
  yolo(): boolean;
  /** True once the chat is exiting (late reports stay quiet). */
  exiting(): boolean;
  /** Shows the prompt again if no turn runs and no question is pending. */
  promptIfIdle(): void;
  dropLink(): Promise<void>;
  ensureSession(resume: string): Promise<OpenSession>;
  /** The open session and its connection's client, opening a new session when none is open. */
  liveSession(): Promise<{ session: OpenSession; client: ScvClient }>;
}

export class SessionCommands {
  readonly view: SessionsView;
  private lastListing: SessionRow[] = [];

  constructor(
    private readonly home: string,
    private readonly h: SessionCommandsHost,
  ) {
    this.view = new SessionsView(home);
  }

  async sessions(): Promise<void> {
    const { s } = this.h;
    const rows = await this.view.listRecent(10);
    this.lastListing = rows;
    if (rows.length === 0) return this.h.status("no saved sessions yet");
    rows.forEach((x, i) => {
      const mark = x.id === this.h.session()?.id ? "*" : " ";
      const when = new Date(x.updatedAtMs).toISOString().slice(0, 16).replace("T", " ");
      this.h.line(`${mark} ${String(i + 1).padStart(2)}. ${x.id}  ${s.dim(when)}  ${s.dim(terminalSafe(x.cwd ?? "?", false))}  ${x.title !== null ? terminalSafe(x.title, false) : s.dim("(untitled)")}`);
    });
    this.h.status("/resume <n|id-prefix> to continue one");
  }

  /**
   * Once a session started (in the background): its MCP servers that failed to start are reported once they all
   * settled; the others say nothing. Quiet when the session is gone meanwhile or the chat is exiting.
   */
  async reportFailedMcp(session: OpenSession, client: ScvClient): Promise<void> {
    const expected = Object.keys(this.h.mcpConfig()).length;
    if (expected === 0) return;
    const servers = await settle(client, session.id, expected, REPORT_WAIT_MS).catch(() => []);
    const failed = servers.filter((sv) => sv.state === "failed");
    if (failed.length === 0 || this.h.exiting() || this.h.session()?.id !== session.id) return;
    for (const sv of failed) this.h.line(this.h.s.red(terminalSafe(`MCP server ${sv.name} failed to start${sv.error !== null ? `: ${sv.error}` : ""}; its tools are missing from this session (/mcp)`, false)));
    this.h.promptIfIdle();
  }

  /** `/tools` (every tool of the session, its risk class and whether it asks) and `/mcp` (each server's state). */
  async tools(mcpOnly: boolean): Promise<void> {
    try {
      await this.listTools(mcpOnly);
    } catch (err) {
      // A server without the extension answers an unknown request type with `invalid_json`.
      if (!(err instanceof ScvRequestError) || err.code !== "invalid_json") throw err;
      this.h.status(`the Berth server does not list a session's ${mcpOnly ? "MCP servers" : "tools"} (session.${mcpOnly ? "mcp" : "tools"}); a newer berth daemon does`);
    }
  }

  private async listTools(mcpOnly: boolean): Promise<void> {
    const started = this.h.session() === null;
    const { session, client } = await this.h.liveSession();
    if (started) this.h.status(`started session ${session.id} to ask it${Object.keys(this.h.mcpConfig()).length > 0 ? " (its MCP servers start now)" : ""}`);
    const servers = await settle(client, session.id, Object.keys(this.h.mcpConfig()).length, SHOW_WAIT_MS);
    if (mcpOnly) {
      if (servers.length === 0) return this.h.status("this session has no MCP servers (mcp_servers in settings.json)");
      this.h.status(`MCP servers of session ${session.id}`);
      for (const l of serverLines(servers, this.h.s)) this.h.line(l);
    } else {
      const tools = await askUntil(() => sessionTools(client, session.id), (t) => t.length > 0, SHOW_WAIT_MS);
      this.h.status(`tools of session ${session.id}`);
      for (const l of toolLines(tools, { yolo: this.h.yolo(), s: this.h.s })) this.h.line(l);
      const notReady = servers.filter((sv) => sv.state !== "ready");
      if (notReady.length > 0) for (const l of serverLines(notReady, this.h.s)) this.h.line(l);
    }
    if (servers.some((sv) => sv.state === "starting")) this.h.status("servers still starting: /mcp again to follow them");
  }

  /**
   * Continues session `ref` (a list number, an ID or a unique prefix of one). Resolves null once resumed, else why it
   * could not be (shown as a status line unless `quiet`: the caller says it).
   */
  async resume(ref: string, quiet = false): Promise<string | null> {
    const fail = (why: string): string => {
      if (!quiet) this.h.status(why);
      return why;
    };
    let id: string;
    const row = /^\d+$/.test(ref) ? this.lastListing[Number(ref) - 1] : undefined;
    if (row !== undefined) id = row.id;
    else {
      const r = await this.view.resolve(ref);
      if ("error" in r) return fail(terminalSafe(r.error, false));
      id = r.id;
    }
    const recorded = await this.view.cwdOf(id);
    if (recorded === null) return fail("that session cannot be read");
    await this.h.dropLink();
    const s = await this.h.ensureSession(id);
    if (s.cwd !== recorded) this.h.line(this.h.s.bold(terminalSafe(`note: ${movedWorkspaceNote(recorded, s.cwd)}`, false)));
    // Read once the server holds the session: a turn a killed process left open is closed by then (failed, with
    // its partial answer), so it shows as not finished rather than as an answer that simply ends.
    const h = await this.view.history(id);
    if (h === null) this.h.status("its history cannot be read");
    else {
      if (h.omitted) this.h.status("older history is not shown");
      for (const [kind, text] of historyLines(h.records, this.h.s)) if (kind === "line") this.h.line(text);
      else this.h.status(text);
    }
    this.h.status(`resumed ${id} in ${s.cwd}${s.cwd !== this.h.cwd ? " (the session's own directory)" : ""}`);
    return null;
  }
}
