/**
 * The interactive chat's session and tool commands: /sessions (recent saved sessions), /resume (show a stored
 * session's history, then continue it), /tools and /mcp (a local check of the session's tool configuration: SCV v3
 * cannot list a session's tools, see probe.ts), and the startup report of MCP servers that failed to start in that
 * check. The chat loop (interactive.ts) owns the connection and the terminal.
 */
import type { McpDef } from "./project.js";
import type { Style } from "./render.js";
import { historyLines, SessionsView, type SessionRow } from "./sessions.js";
import type { OpenSession } from "./turn-events.js";

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
      this.h.line(`${mark} ${String(i + 1).padStart(2)}. ${x.id}  ${s.dim(when)}  ${s.dim(x.cwd ?? "?")}  ${x.title ?? s.dim("(untitled)")}`);
    });
    this.h.status("/resume <n|id-prefix> to continue one");
  }

  /** At startup, in the background: MCP servers that fail to start are reported (the others say nothing). */
  async reportFailedMcp(): Promise<void> {
    if (Object.keys(this.h.mcpConfig()).length === 0) return;
    const { probeTools } = await import("./probe.js");
    const p = await probeTools(this.h.cwd, this.h.mcpConfig(), this.home).catch(() => null);
    const failed = p?.servers.filter((sv) => sv.state !== "ready") ?? [];
    if (failed.length === 0 || this.h.exiting()) return;
    for (const sv of failed)
      this.h.line(this.h.s.red(`MCP server ${sv.name} failed to start${sv.error !== null ? `: ${sv.error}` : ""} (in this chat's own check; the session's copy likely fails the same way and its tools are then missing; /mcp checks again)`));
    this.h.promptIfIdle();
  }

  async tools(mcpOnly: boolean): Promise<void> {
    const names = Object.keys(this.h.mcpConfig());
    if (mcpOnly && names.length === 0) return this.h.status("no MCP servers configured (mcp_servers in settings.json)");
    const servers = names.length > 0 ? `; starting its ${names.length} MCP server${names.length === 1 ? "" : "s"} here…` : "";
    // SCV v3 cannot list a session's tools: say that this is the chat's own check, not the session's state.
    this.h.status(`${mcpOnly ? "MCP servers" : "tools"} of this chat's session configuration, checked by the chat itself (SCV cannot list the session's own)${servers}`);
    const { probeTools, probeLines } = await import("./probe.js");
    const p = await probeTools(this.h.session()?.cwd ?? this.h.cwd, this.h.mcpConfig(), this.home);
    for (const l of probeLines(p, { mcpOnly, yolo: this.h.yolo(), s: this.h.s })) this.h.line(l);
  }

  /** Shows a stored session's history, then continues it over SCV in its own cwd. */
  async resume(ref: string): Promise<void> {
    let id: string;
    const row = /^\d+$/.test(ref) ? this.lastListing[Number(ref) - 1] : undefined;
    if (row !== undefined) id = row.id;
    else {
      const r = await this.view.resolve(ref);
      if ("error" in r) return this.h.status(r.error);
      id = r.id;
    }
    const h = await this.view.history(id);
    if (h === null) return this.h.status("that session cannot be read");
    await this.h.dropLink();
    const s = await this.h.ensureSession(id);
    if (h.omitted) this.h.status("older history is not shown");
    for (const [kind, text] of historyLines(h.records, this.h.s)) if (kind === "line") this.h.line(text);
    else this.h.status(text);
    this.h.status(`resumed ${id} in ${s.cwd}${s.cwd !== this.h.cwd ? " (the session's own directory)" : ""}`);
  }
}
