/**
 * `/tools`, `/mcp` and the report of MCP servers that failed to start, asked of the running session over SCV (Berth
 * extension requests `session.mcp` and `session.tools`, docs/scv.md): what is listed is the session's own state, in
 * the daemon or `berth stdio` process that runs it.
 * Contracts: both requests answer snapshots and nothing is pushed, so `askUntil` asks again (100 ms, growing to
 * 500 ms apart) until no server is `starting` and the session's tools are prepared (a session asked within moments of its
 * start may not list them yet), or until `waitMs` passed; the caller then shows what the last answer said. A server
 * that does not know the extension answers an error, which rejects (`ScvRequestError`).
 */
import type { ScvClient } from "../../client/scv/client.js";
import type { Style } from "./render.js";
import { terminalSafe } from "../terminal-safe.js";

export interface ServerRow {
  name: string;
  state: string;
  tools: number;
  error: string | null;
}

export interface ToolRow {
  name: string;
  risk: string;
  server: string | null;
  description: string;
}

function str(v: unknown, dflt = ""): string {
  return typeof v === "string" ? v : dflt;
}

export async function sessionMcp(client: ScvClient, sessionId: string): Promise<ServerRow[]> {
  const ev = await client.conn.request("session.mcp", { session_id: sessionId }, ["session.mcp"]);
  const list = Array.isArray(ev["servers"]) ? (ev["servers"] as Array<Record<string, unknown>>) : [];
  return list.map((x) => ({ name: str(x["name"], "?"), state: str(x["state"], "?"), tools: typeof x["tools"] === "number" ? x["tools"] : 0, error: typeof x["error"] === "string" ? x["error"] : null }));
}

export async function sessionTools(client: ScvClient, sessionId: string): Promise<ToolRow[]> {
  const ev = await client.conn.request("session.tools", { session_id: sessionId }, ["session.tools"]);
  const list = Array.isArray(ev["tools"]) ? (ev["tools"] as Array<Record<string, unknown>>) : [];
  return list.map((x) => ({ name: str(x["name"], "?"), risk: str(x["risk"], "?"), server: typeof x["server"] === "string" ? x["server"] : null, description: str(x["description"]) }));
}

/** Asks again (100 ms, growing to 500 ms apart) until `ok` holds for the answer or `waitMs` passed; the last answer. */
export async function askUntil<T>(ask: () => Promise<T>, ok: (v: T) => boolean, waitMs: number, now: () => number = Date.now): Promise<T> {
  const until = now() + waitMs;
  let gap = 100;
  for (;;) {
    const v = await ask();
    if (ok(v) || now() >= until) return v;
    await new Promise((resolve) => setTimeout(resolve, gap).unref());
    gap = Math.min(gap * 2, 500);
  }
}

/**
 * The session's servers once none is starting and at least `expected` are listed (the servers the chat's settings
 * name; the session may still be preparing them), or the last answer after `waitMs`.
 */
export function settle(client: ScvClient, sessionId: string, expected: number, waitMs: number): Promise<ServerRow[]> {
  return askUntil(
    () => sessionMcp(client, sessionId),
    (servers) => servers.length >= expected && servers.every((x) => x.state !== "starting"),
    waitMs,
  );
}

/** One line of server text (a name, a state, an error, a tool's description) without terminal controls. */
const safe = (t: string): string => terminalSafe(t, false);

/** `/mcp`: one line per server (ready with its tool count and the tools it left out, else its state and why). */
export function serverLines(servers: ServerRow[], s: Style): string[] {
  return servers.map(
    (sv) => `  ${s.bold(safe(sv.name))}: ${sv.state === "ready" ? `ready, ${sv.tools} tool${sv.tools === 1 ? "" : "s"}${sv.error !== null ? safe(`; ${sv.error}`) : ""}` : s.red(safe(`${sv.state}${sv.error !== null ? ` (${sv.error})` : ""}`))}`,
  );
}

/** `/tools`: every tool with its risk class, whether it asks, its server (MCP tools) and description. */
export function toolLines(tools: ToolRow[], o: { yolo: boolean; s: Style }): string[] {
  return tools.map((t) => {
    const asks = o.yolo || t.risk === "read_only" ? "" : " · asks";
    const from = t.server !== null ? ` · MCP ${t.server}` : "";
    // An MCP server's description is its own text: shown without controls (cut first, so `^[` counts as shown).
    return `  ${safe(t.name).padEnd(24)} ${o.s.dim(safe(`${t.risk}${asks}${from}  ${t.description.slice(0, 100)}`))}`;
  });
}
