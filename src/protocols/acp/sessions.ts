/**
 * `session/new`, `session/load`, `session/resume`, `session/close`, `session/set_mode`,
 * `session/set_config_option`.
 *
 * Contracts:
 * - Sessions are ordinary Berth sessions (the same store every door lists). `cwd` must be absolute (`-32602`).
 * - `session/new` needs a provider with credentials (`-32000` otherwise, with `authMethods` to fix it).
 * - The client's MCP servers (stdio) are attached for the session, added to the settings' `mcp_servers` (the
 *   client's win on a name clash). Environment entries are passed to the server process only. An `http` or `sse`
 *   server (not advertised), or more than `MAX_SESSION_MCP_SERVERS` servers, is `-32602` (each is a process the
 *   session's first turn starts, all at once).
 * - `session/load` sends the whole durable history as `session/update`s, then answers; `session/resume` answers
 *   without replay. Both refuse an unknown session with `-32002`. Loading a session already open on this connection
 *   reattaches it with the new cwd and MCP servers (applied from the next turn).
 * - Both first have the runtime close a turn a killed process left open (`AcpConnection.readHistory`; the lease is
 *   the session manager's, never this adapter's). A load of a session whose last turn another live process runs, or
 *   one that cannot settle now (16 turns running here), is `-32600`; a resume is not (it shows nothing).
 * - A replay is never mixed with live updates: `session/load` of a session whose prompt turn runs on this connection
 *   is `-32600` (wait for the stop reason, or resume, which does not replay), and while a load replays, a prompt or
 *   another load of that session is `-32600` (`AcpConnection.claim`).
 * - `session/close` cancels the session's running turn, waits for it, and forgets the session on this connection;
 *   its history stays. Closing an unknown session is `-32002`. From its arrival, a prompt or configuration change of
 *   that session is `-32002` (`AcpConnection.closingFrom`).
 * - `session/load`, `session/resume` and `session/close` of one session are handled in arrival order
 *   (`AcpConnection.serial`): one sent before an earlier one was answered starts after that answer, so a close sent
 *   behind a load closes the loaded session and a load sent behind a close opens it again.
 * - Requests naming a session not open on this connection are `-32002`; `session/set_mode` and
 *   `session/set_config_option` sent behind a load or resume of their session first wait for its answer
 *   (`AcpConnection.ready`).
 */
import type { AgentApp, McpServer, SessionConfigOption } from "@agentclientprotocol/sdk";
import { handle } from "./handle.js";
import { ACP_ERRORS, MAX_SESSION_MCP_SERVERS } from "./errors.js";
import { replayUpdates } from "./replay.js";
import { approvalOf, configOptions, isModeId, isThinkingLevel, modelChoices, modeState, type SessionChoices } from "./config-options.js";
import type { AcpConnection } from "./connection.js";
import type { McpServerDef } from "../../store/settings/schema.js";
import { AcpSession } from "./session.js";

/** The session's MCP servers: the settings' plus the client's stdio servers (undefined: the settings' alone). */
async function mcpServers(conn: AcpConnection, given: McpServer[]): Promise<Record<string, McpServerDef> | undefined> {
  if (given.length > MAX_SESSION_MCP_SERVERS) throw ACP_ERRORS.tooManyMcpServers();
  if (given.some((s) => "type" in s && (s as { type?: string }).type !== undefined)) throw ACP_ERRORS.mcpTransport();
  const stdio = given as Array<Extract<McpServer, { command: string }>>;
  if (stdio.length === 0) return undefined;
  const base = await conn.settingsMcp();
  const out: Record<string, McpServerDef> = { ...base };
  for (const s of stdio) out[s.name] = { command: s.command, args: [...s.args], env: Object.fromEntries(s.env.map((v) => [v.name, v.value])) };
  return out;
}

export function registerSessions(app: AgentApp, conn: AcpConnection): void {
  const describe = async (s: AcpSession): Promise<{ modes: ReturnType<typeof modeState>; configOptions: SessionConfigOption[] }> => ({
    modes: modeState(s.choices),
    configOptions: await configOptions(conn.sources, s.choices),
  });

  const attach = async (id: string, cwd: string, given: McpServer[], client: Parameters<typeof conn.open>[3]): Promise<AcpSession> => {
    const mcp = await mcpServers(conn, given);
    return conn.open(id, cwd, mcp, client);
  };

  handle(app, conn.log, "session/new", async ({ params, client }) => {
    await conn.checkWorkspace(params.cwd);
    await conn.requireAuth();
    const mcp = await mcpServers(conn, params.mcpServers);
    const s = await conn.create(params.cwd, mcp, client);
    return { sessionId: s.id, ...(await describe(s)) };
  });

  handle(app, conn.log, "session/load", async ({ params, client }) => {
    // Claimed before anything is awaited: a prompt turn of this session on this connection would interleave its live
    // updates with the replay (and a second load its replay), so either one refuses the other.
    const claim = conn.claim(params.sessionId, "load");
    if ("busy" in claim) throw claim.busy === "prompt" ? ACP_ERRORS.loadDuringTurn() : ACP_ERRORS.loading();
    try {
      return await conn.serial(params.sessionId, async () => {
        await conn.checkWorkspace(params.cwd);
        const history = await conn.readHistory(params.sessionId, "load");
        const s = await attach(params.sessionId, params.cwd, params.mcpServers, client);
        for (const u of replayUpdates(history, params.cwd)) void s.send(u);
        await s.flush();
        return await describe(s);
      });
    } finally {
      claim.release();
    }
  });

  handle(app, conn.log, "session/resume", ({ params, client }) =>
    conn.serial(params.sessionId, async () => {
      await conn.checkWorkspace(params.cwd);
      await conn.readHistory(params.sessionId, "resume");
      const s = await attach(params.sessionId, params.cwd, params.mcpServers ?? [], client);
      return describe(s);
    }),
  );

  handle(app, conn.log, "session/close", async ({ params }) => {
    // Closed for every request read after this one, even while the close waits for an earlier load or resume.
    const closed = conn.closingFrom(params.sessionId);
    try {
      return await conn.serial(params.sessionId, async () => {
        if (!(await conn.close(params.sessionId))) throw ACP_ERRORS.unknownSession(params.sessionId);
        return {};
      });
    } finally {
      closed();
    }
  });

  handle(app, conn.log, "session/set_mode", async ({ params, requestId }) => {
    // At once unless a session/load or session/resume of this session was read before it and is unanswered.
    const ready = conn.ready(params.sessionId, requestId);
    const s = ready instanceof Promise ? await ready : ready;
    if (!isModeId(params.modeId)) throw ACP_ERRORS.unknownMode();
    s.choices = { ...s.choices, mode: params.modeId };
    s.configure({ approval: approvalOf(params.modeId) });
    return {};
  });

  handle(app, conn.log, "session/set_config_option", async ({ params, requestId }) => {
    const ready = conn.ready(params.sessionId, requestId);
    const s = ready instanceof Promise ? await ready : ready;
    if ("type" in params && params.type === "boolean") throw ACP_ERRORS.unknownConfig();
    const value = params.value as string;
    let next: SessionChoices;
    if (params.configId === "mode" && isModeId(value)) next = { ...s.choices, mode: value };
    else if (params.configId === "reasoning" && isThinkingLevel(value)) next = { ...s.choices, reasoning: value };
    else if (params.configId === "model" && (await modelChoices(conn.sources, s.choices)).includes(value)) next = { ...s.choices, model: value };
    else throw ACP_ERRORS.unknownConfig();
    s.choices = next;
    s.configure({
      approval: approvalOf(next.mode),
      selection: { ...(next.model !== null ? { model: next.model } : {}), ...(next.reasoning !== null ? { reasoning: next.reasoning } : {}) },
    });
    return { configOptions: await configOptions(conn.sources, next) };
  });
}
