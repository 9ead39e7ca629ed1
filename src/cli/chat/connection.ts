/**
 * The interactive chat's connection to its SCV server and the session open on it.
 * Contract: SCV has one session per connection, so a new conversation (/new, /resume) drops the connection and
 * opens a fresh one in the background; the session is created on first use. A connection that ends while it is the
 * current one (the server stopped) is reported once through `onLost`, with how it was connected and the session that
 * was open on it (and the model that server named for it), never for one the chat dropped itself; `reconnect` then
 * opens a new connection (the daemon if one answers again, else a `berth stdio` child) and resumes that session on it. Every session opened carries the selection the user chose
 * here (selection.ts), so a daemon runs it rather than its own; a daemon that does not know that provider refuses
 * the session, said in one line with the fix (`RequestError`).
 */
import type { ScvClient } from "../../client/scv/client.js";
import type { McpDef } from "./project.js";
import { openLink, type Link } from "./link.js";
import type { OpenSession } from "./turn-events.js";
import { daemonSelection, openChosen, type Chosen } from "./selection.js";

export interface SessionSettings {
  cwd: string;
  /** Approve every call on the server (`--yolo`). */
  autoApprove(): boolean;
  /** The provider and model the user chose here (selection.ts `chosenHere`), else null: the server's selection. */
  chosen(): Chosen | null;
  /** The session's MCP servers when the chat chooses them (a trusted project's), else null: the settings'. */
  mcpServers(): Record<string, McpDef> | null;
  /** Called once for every session this connection opens (new or resumed), with the client it is open on. */
  opened?(s: OpenSession, client: ScvClient): void;
}

export class Connection {
  private link: Link | null = null;
  private linking: Promise<Link> | null;
  session: OpenSession | null = null;
  /** The context gauge's last reading for the open session. */
  ctx: { current: number; max: number } | null = null;
  private closing = false;

  constructor(
    private readonly settings: SessionSettings,
    /**
     * The current connection ended by itself; the detail is the server's last stderr line, when there is one, and
     * `lost` how it was connected (`via`) and the session open on it (null: none was), with the model it ran.
     */
    private readonly onLost: (detail: string, lost: { via: Link["via"]; session: string | null; model: string | null }) => void,
  ) {
    this.linking = openLink(process.env);
    this.linking.catch(() => undefined);
  }

  /** How the first connection was made (`daemon` or `stdio`), or null when it failed. */
  via(): Promise<string | null> {
    return (this.linking ?? Promise.resolve(this.link!)).then((l) => l.via).catch(() => null);
  }

  /** Why the first connection reached no daemon, when that is for the user to fix (link.ts `note`), else null. */
  note(): Promise<string | null> {
    return (this.linking ?? Promise.resolve(this.link!)).then((l) => l.note).catch(() => null);
  }

  /** What the daemon serving this chat runs for a session that names no selection; null for any other server. */
  async daemonSelection(): Promise<{ provider: string; model: string | null } | null> {
    const l = await this.current().catch(() => null);
    return l?.via === "daemon" ? daemonSelection(l.client) : null;
  }

  /** The current connection (reopened after /new or /resume closed the last one). */
  async current(): Promise<Link> {
    if (this.link !== null) return this.link;
    this.linking ??= openLink(process.env);
    const l = await this.linking;
    this.linking = null;
    this.link = l;
    void l.closed.then(() => {
      if (this.closing || this.link !== l) return;
      const lost = { via: l.via, session: this.session?.id ?? null, model: this.session?.model ?? null };
      this.link = null;
      this.session = null;
      this.ctx = null;
      const tail = l.stderrTail().trim();
      this.onLost(tail !== "" ? tail.split("\n").at(-1)!.slice(0, 200) : "", lost);
    });
    return l;
  }

  /** Drops the connection (its session ends with it) and starts opening a fresh one in the background. */
  async drop(): Promise<void> {
    const l = this.link;
    this.link = null;
    this.session = null;
    this.ctx = null;
    if (l === null && this.linking !== null) return; // a fresh connection (no session yet) is already on its way
    await l?.close();
    this.linking = openLink(process.env);
    this.linking.catch(() => undefined);
  }

  /**
   * After `onLost`: a new connection, made as the first one was, with `session` (the lost one's) resumed on it.
   * Resolves with how it connected; rejects when no server can be reached or the session cannot be resumed.
   */
  async reconnect(session: string | null): Promise<Link["via"]> {
    const l = await this.current();
    if (session !== null) await this.open(session);
    return l.via;
  }

  /** The open session, or a new one (`resume`: continue that stored session instead). */
  async open(resume?: string): Promise<OpenSession> {
    if (this.session !== null && resume === undefined) return this.session;
    const l = await this.current();
    const mcp = this.settings.mcpServers();
    const params = { cwd: this.settings.cwd, auto_approve: this.settings.autoApprove(), ...(resume !== undefined ? { resume } : {}), ...(mcp !== null ? { mcp_servers: mcp } : {}) };
    const ev = await openChosen(l, params, this.settings.chosen());
    const s: OpenSession = {
      id: String(ev["session_id"]),
      cwd: typeof ev["cwd"] === "string" ? ev["cwd"] : this.settings.cwd,
      model: typeof ev["model"] === "string" ? ev["model"] : null,
      ctxMax: typeof ev["context_max_tokens"] === "number" ? ev["context_max_tokens"] : null,
    };
    this.session = s;
    this.settings.opened?.(s, l.client);
    return s;
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all([this.link?.close(), this.linking?.then((l) => l.close()).catch(() => undefined)]);
  }
}
