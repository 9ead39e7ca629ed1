/**
 * The tool registry a session's turn loop uses: built-in tools plus MCP tools from the
 * configured servers. `noTools` yields an empty registry (no servers started). Creating a
 * registry never rejects because of a failing MCP server (see `mcpServers` for their state).
 */
import type { McpServerDef } from "../../store/settings/schema.js";
import type { Tool, ToolSpec } from "../types.js";
import { createBashTool, type BashOptions } from "./bash.js";
import { editTool } from "./edit.js";
import { globTool } from "./glob.js";
import { grepTool } from "./grep.js";
import type { ToolPolicy } from "./confine.js";
import { lsTool } from "./ls.js";
import { todoWriteTool } from "./todo-write.js";
import type { McpOptions, McpServerStatus } from "./mcp.js";
import { withPolicy } from "./policy.js";
import { readTool } from "./read.js";
import { createReadSkillTool } from "./read-skill.js";
import { createChatAttachTool } from "./chat-attach.js";
import type { SkillCatalog } from "./skills.js";
import { createWebFetchTool, type WebFetchOptions } from "./web-fetch.js";
import { writeTool } from "./write.js";

export interface ToolRegistryOptions {
  /** Working directory MCP servers start in (built-in tools use `ToolContext.cwd` per call). */
  cwd: string;
  mcpServers?: Record<string, McpServerDef>;
  noTools?: boolean;
  bash?: BashOptions;
  mcp?: Omit<McpOptions, "cwd">;
  /** Policy of the built-in tools (file confinement, bash sandbox). Default: `DEFAULT_TOOL_POLICY` (confined). */
  policy?: ToolPolicy;
  /** Adds `read_skill` over this catalog. */
  skills?: SkillCatalog;
  /** Adds `web_fetch` with these options. */
  webFetch?: WebFetchOptions;
  /** Adds `chat_attach`, copying into this home's media outbox (offered by the turn loop only to channel sessions). */
  chatAttachHome?: string;
}

export interface ToolRegistry {
  /** Built-ins first (read, write, edit, bash, grep, glob, ls, todo_write, then read_skill, web_fetch and chat_attach when configured), then MCP tools by server name. */
  readonly tools: readonly Tool[];
  get(name: string): Tool | undefined;
  specs(): ToolSpec[];
  readonly mcpServers: readonly McpServerStatus[];
  /** Stops every MCP server. Idempotent. */
  close(): Promise<void>;
}

export const BUILTIN_TOOL_NAMES = ["read", "write", "edit", "bash", "grep", "glob", "ls", "todo_write"] as const;

export function builtinTools(bash?: BashOptions, policy?: ToolPolicy): Tool[] {
  const tools = [readTool, writeTool, editTool, bash === undefined ? createBashTool() : createBashTool(bash), grepTool, globTool, lsTool, todoWriteTool];
  return policy === undefined ? tools : tools.map((t) => withPolicy(t, policy));
}

export async function createToolRegistry(opts: ToolRegistryOptions): Promise<ToolRegistry> {
  if (opts.noTools === true) return makeRegistry([], [], () => Promise.resolve());
  const local = builtinTools(opts.bash, opts.policy);
  if (opts.skills !== undefined) local.push(createReadSkillTool(opts.skills));
  if (opts.webFetch !== undefined) local.push(createWebFetchTool(opts.webFetch));
  if (opts.chatAttachHome !== undefined) {
    const t = createChatAttachTool(opts.chatAttachHome);
    local.push(opts.policy === undefined ? t : withPolicy(t, opts.policy));
  }
  const defs = opts.mcpServers ?? {};
  if (Object.keys(defs).length === 0) return makeRegistry(local, [], () => Promise.resolve());
  // The MCP SDK costs ~80 ms to load: only sessions with configured servers pay for it.
  const { connectMcpServers } = await import("./mcp.js");
  const mcp = await connectMcpServers(defs, { ...opts.mcp, cwd: opts.cwd });
  return makeRegistry([...local, ...mcp.tools], mcp.servers, () => mcp.close());
}

function makeRegistry(tools: Tool[], servers: McpServerStatus[], close: () => Promise<void>): ToolRegistry {
  const byName = new Map<string, Tool>();
  for (const t of tools) if (!byName.has(t.spec.name)) byName.set(t.spec.name, t);
  const list = [...byName.values()];
  let closing: Promise<void> | null = null;
  return {
    tools: list,
    get: (name) => byName.get(name),
    specs: () => list.map((t) => ({ name: t.spec.name, description: t.spec.description, inputSchema: t.spec.inputSchema })),
    mcpServers: servers,
    close: () => (closing ??= close()),
  };
}
