/**
 * A session's MCP servers as its runtime sees them: prepares them through the runner (`TurnRunner.openSession`)
 * and fans their state changes out to listeners. Never throws; a listener's failure is its own.
 */
import type { TurnRunner } from "./deps.js";
import type { McpServerInfo, SessionConfig, SessionToolInfo } from "./types.js";

export class SessionMcp {
  private watching = false;
  /** Settles once the latest `prepare` registered the servers (the runner's `openSession` resolved). */
  private registered: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<(servers: McpServerInfo[]) => void>();

  constructor(
    private readonly runner: TurnRunner,
    private readonly sessionId: string,
  ) {}

  /** Whether `prepare` ran (a configuration change then prepares again). */
  get prepared(): boolean {
    return this.watching;
  }

  /** Has the runner start the session's MCP servers now (in `cfg.cwd`); their changes reach `watch` listeners. */
  prepare(cfg: Readonly<SessionConfig>): void {
    const first = !this.watching;
    this.watching = true;
    const opened = this.runner.openSession?.(
      {
        sessionId: this.sessionId,
        cwd: cfg.cwd,
        ...(cfg.mcpServers !== undefined ? { mcpServers: cfg.mcpServers } : {}),
        ...(cfg.noTools === true ? { noTools: true } : {}),
      },
      first ? (servers) => this.changed(servers) : undefined,
    );
    this.registered = opened === undefined ? Promise.resolve() : opened.catch(() => undefined);
  }

  /**
   * Resolves once the servers of the latest `prepare` are registered (listed by `servers()` as `starting` or later),
   * not once they started; never rejects. A door awaits it before announcing a session, so a status request sent
   * at once lists them.
   */
  whenRegistered(): Promise<void> {
    return this.registered;
  }

  private changed(servers: McpServerInfo[]): void {
    for (const l of [...this.listeners]) {
      try {
        l(servers);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  watch(listener: (servers: McpServerInfo[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  servers(): McpServerInfo[] {
    return this.runner.mcpStatus?.(this.sessionId) ?? [];
  }

  tools(): SessionToolInfo[] {
    return this.runner.toolList?.(this.sessionId) ?? [];
  }

  /** Stops the session's servers (once no turn holds them). */
  close(): Promise<void> {
    this.listeners.clear();
    return this.runner.closeSession?.(this.sessionId).catch(() => undefined) ?? Promise.resolve();
  }
}
