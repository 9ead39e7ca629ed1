/**
 * MCP tools: connects to each configured stdio MCP server with the official SDK client, lists its
 * tools and wraps each as a `Tool` (transport "mcp"). Contracts:
 * - A server's stderr never reaches our stdout/stderr (piped; its last 4 KiB kept in memory on
 *   the status record only). The server runs in `cwd` with the SDK's safe default environment
 *   plus the configured `env` (Berth's own stdio transport, mcp-transport.ts).
 * - Servers start in parallel (`startMcpServers` returns at once, every server `starting`); each becomes `ready`
 *   or `failed` on its own, reported through `onChange`. A server that fails to start, initialize or list tools
 *   is `failed` and contributes no tools; it never prevents other servers from loading.
 *   `connectMcpServers` is the same, resolved once every server settled.
 * - A listed tool whose input schema nests deeper than 64 levels or is larger than 64 KiB (json-schema.ts) is left
 *   out: it would go with every turn's request. So is, in list order, each tool that would take the server's specs
 *   (name, description, schema as sent) past MCP_MAX_SERVER_SPEC_BYTES in all. The server is still `ready`; its
 *   `error` names the tools left out and why.
 * - Model-facing names are `mcp__<server>__<tool>`, sanitized to `[A-Za-z0-9_-]`, at most 64
 *   characters (shortened with a hash suffix when longer or colliding).
 * - Calls carry the AbortSignal; results are bounded text. A crashed or closed server → every
 *   later call returns `unavailable`; a server being stopped fails its pending calls at once, not once its process
 *   is gone. `close()` closes every client (stdin end, then SIGTERM, then SIGKILL by the transport) and is
 *   idempotent.
 * - One message line of a server's stdout is at most `maxLineBytes` (default 16 MiB, newline excluded; see
 *   mcp-transport.ts). A server that sends a longer one is stopped and `failed` with an error naming the bound;
 *   its pending and later calls are `unavailable`. While starting, that is a start failure like any other.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerDef } from "../../store/settings/schema.js";
import type { Tool, ToolResult } from "../types.js";
import { MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH, schemaFits, validateJsonSchema } from "./json-schema.js";
import { boundText, describeError, fail, ok } from "./result.js";
import { textOf } from "../../core/json-text.js";
import { compactJsonBytes } from "../../core/json-bounds.js";
import { mcpToolName, mergeTools } from "./mcp-names.js";
import { BoundedStdioTransport } from "./mcp-transport.js";

export { sanitizeName, mcpToolName } from "./mcp-names.js";

export interface McpOptions {
  /** Working directory the servers start in. */
  cwd: string;
  /** Start + initialize + tools/list budget per server. Default 30 s. */
  connectTimeoutMs?: number;
  /** One tools/call budget. Default 120 s. */
  callTimeoutMs?: number;
  /** Bytes of one message line from a server's stdout, newline excluded (a positive integer). Default 16 MiB. */
  maxLineBytes?: number;
}

export interface McpServerStatus {
  name: string;
  state: "starting" | "ready" | "failed" | "closed";
  /** Why it failed (connect error or crash), a fixed-shape one-liner; on a ready server, the listed tools left out. */
  error?: string;
  toolCount: number;
  /** Server process id while it runs (tests use it to prove shutdown). */
  pid: number | null;
  /** Last bytes the server wrote to its stderr (diagnostics; never printed by Berth). */
  stderrTail(): string;
}

export interface McpConnections {
  tools: Tool[];
  servers: McpServerStatus[];
  close(): Promise<void>;
}

/** A tool as a server listed it (what the tool-list cache keeps). */
export interface ListedTool {
  name: string;
  description?: string | undefined;
  inputSchema: Record<string, unknown>;
}

/** Servers starting in the background (`startMcpServers`). */
export interface McpServers {
  readonly servers: readonly McpServerStatus[];
  /** Tools of the servers ready now (sorted server order; names unique among them). */
  tools(): Tool[];
  /** One server's tools (names unique within it) and its raw list, once it listed them; null before or on failure. */
  listed(name: string): { tools: Tool[]; raw: ListedTool[] } | null;
  /** Settles once every server is ready or failed. */
  readonly settled: Promise<void>;
  /** Stops every server (a starting one is stopped once its start settles). Idempotent. */
  close(): Promise<void>;
}

export const MCP_DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
export const MCP_DEFAULT_CALL_TIMEOUT_MS = 120_000;
/** One JSON-RPC message line from a server's stdout, newline excluded: exactly this many bytes pass, one more stops it. */
export const MCP_MAX_LINE_BYTES = 16 * 1024 * 1024;
const MAX_TOOLS_PER_SERVER = 512;
/**
 * All of one server's tool specs as sent to the provider (name, description, input schema; compact JSON bytes), at
 * most this much: each schema's own bounds (64 KiB × 512 tools) still let one server add 32 MiB to every request.
 * Real servers list a few dozen tools of a few KiB (the largest we know stay well under 256 KiB in all); past 1 MiB
 * the tools are a cost on every turn no model benefits from.
 */
export const MCP_MAX_SERVER_SPEC_BYTES = 1024 * 1024;
const MAX_LIST_PAGES = 16;
const MAX_DESCRIPTION_CHARS = 2048;
const STDERR_TAIL_BYTES = 4096;

const CLIENT_INFO = { name: "berth", version: "0.1.0" };
/** `McpError.code` is a plain number; these name the SDK codes a failed call is mapped from. */
const MCP_REQUEST_TIMEOUT: number = ErrorCode.RequestTimeout;
const MCP_CONNECTION_CLOSED: number = ErrorCode.ConnectionClosed;
const MCP_INVALID_PARAMS: number = ErrorCode.InvalidParams;

/** `16 MiB (16777216 bytes)`, `4 KiB (4096 bytes)`, or `1000 bytes`. */
function sizeText(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB (${bytes} bytes)`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB (${bytes} bytes)`;
  return `${bytes} bytes`;
}

/** The error of a server stopped for a line past the bound: the cause and the fix. */
function lineTooLongError(name: string, maxLineBytes: number): string {
  return (
    `MCP server "${name}" sent a message line longer than ${sizeText(maxLineBytes)} without a newline; it was stopped. ` +
    "Check the server's output, or ask its author to keep each JSON-RPC message on one line of at most that size."
  );
}

/** A ready server's note on the tools whose input schema is past the bounds (json-schema.ts): not offered. */
function leftOutNote(names: string[]): string {
  const shown = names.slice(0, 3).map((n) => n.slice(0, 64)).join(", ") + (names.length > 3 ? ", …" : "");
  return (
    `left out ${names.length} tool${names.length === 1 ? "" : "s"} (${shown}): ${names.length === 1 ? "its" : "their"} input schema nests deeper than ` +
    `${MAX_SCHEMA_DEPTH} levels or is larger than ${sizeText(MAX_SCHEMA_BYTES)}; ask the server's author to simplify it`
  );
}

/** A ready server's note on the tools left out for the bound on all its specs (MCP_MAX_SERVER_SPEC_BYTES). */
function overTotalNote(names: string[]): string {
  const shown = names.slice(0, 3).map((n) => n.slice(0, 64)).join(", ") + (names.length > 3 ? ", …" : "");
  return (
    `left out ${names.length} tool${names.length === 1 ? "" : "s"} (${shown}): the server's tool specs would pass ${sizeText(MCP_MAX_SERVER_SPEC_BYTES)} ` +
    "of JSON in all, sent with every request; ask the server's author to offer fewer tools or shorter descriptions and schemas"
  );
}

/** Text of an MCP call result: text parts joined; other parts described by kind only. */
function resultText(res: Record<string, unknown>): string {
  const content = Array.isArray(res.content) ? (res.content as unknown[]) : [];
  const parts: string[] = [];
  for (const c of content) {
    if (typeof c !== "object" || c === null) continue;
    const item = c as Record<string, unknown>;
    if (item.type === "text" && typeof item.text === "string") parts.push(item.text);
    else if (item.type === "image" || item.type === "audio") parts.push(`[${item.type} content (${textOf(item.mimeType, "unknown type")}) omitted]`);
    else if (item.type === "resource" && typeof item.resource === "object" && item.resource !== null) {
      const r = item.resource as Record<string, unknown>;
      parts.push(typeof r.text === "string" ? r.text : `[resource ${textOf(r.uri)} omitted]`);
    } else if (item.type === "resource_link") parts.push(`[resource link ${textOf(item.uri)}]`);
  }
  if (parts.length === 0 && res.structuredContent !== undefined) return JSON.stringify(res.structuredContent);
  if (parts.length === 0 && res.toolResult !== undefined) return JSON.stringify(res.toolResult);
  return parts.join("\n");
}

class ServerConnection implements McpServerStatus {
  state: McpServerStatus["state"] = "starting";
  error?: string;
  toolCount = 0;
  pid: number | null = null;
  private stderrBuf = Buffer.alloc(0);
  private readonly client = new Client(CLIENT_INFO);
  private readonly transport: BoundedStdioTransport;
  private closing: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  /** Set once the server sent a line past the bound (the error it fails with). */
  private overflow: string | null = null;
  /** The tool list as the server gave it (once listed). */
  raw: ListedTool[] | null = null;

  constructor(
    readonly name: string,
    def: McpServerDef,
    cwd: string,
    maxLineBytes: number,
    private readonly onChange?: () => void,
  ) {
    const params = { command: def.command, args: def.args, env: def.env, cwd };
    this.transport = new BoundedStdioTransport(params, maxLineBytes, () => this.stopForLongLine(maxLineBytes));
    this.transport.stderr.on("data", (chunk: Buffer) => {
      const all = Buffer.concat([this.stderrBuf, chunk]);
      this.stderrBuf = all.length > STDERR_TAIL_BYTES ? all.subarray(all.length - STDERR_TAIL_BYTES) : all;
    });
    this.client.onclose = () => {
      this.pid = null;
      if (this.state === "ready" && this.closing === null) {
        this.state = "failed";
        this.error = "server connection closed";
        this.changed();
      }
    };
    // Transport errors surface through failed requests / onclose; keep them off our stderr.
    this.client.onerror = () => undefined;
  }

  stderrTail(): string {
    return this.stderrBuf.toString("utf8");
  }

  private changed(): void {
    try {
      this.onChange?.();
    } catch {
      // a listener's failure is its own
    }
  }

  /** The server sent a line past the bound (its stdout is no longer read): fail it and stop its process. */
  private stopForLongLine(maxLineBytes: number): void {
    if (this.closing !== null || this.overflow !== null) return;
    this.overflow = lineTooLongError(this.name, maxLineBytes);
    // While starting, `connect` fails with this error once the stop rejects its pending request.
    const wasReady = this.state === "ready";
    if (wasReady) {
      this.state = "failed";
      this.error = this.overflow;
    }
    void this.stop();
    if (wasReady) this.changed();
  }

  /** True once the server must not become ready: closed, or stopped for a line past the bound. */
  private halted(): boolean {
    return this.closing !== null || this.overflow !== null;
  }

  /** Starts the server and lists its tools; on failure, state "failed" and the process is stopped. */
  async connect(timeoutMs: number, taken: Set<string>, callTimeoutMs: number): Promise<Tool[]> {
    const signal = AbortSignal.timeout(timeoutMs);
    if (this.closing !== null) return [];
    try {
      await this.client.connect(this.transport, { timeout: timeoutMs, signal });
      if (this.halted()) throw new Error("closed while starting");
      this.pid = this.transport.pid;
      const listed: ListedTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const res = await this.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs, signal });
        // Element by element up to the bound: a hostile server's page of 200,000 tools spread into one call
        // overflows the stack, and only the first MAX_TOOLS_PER_SERVER are kept anyway.
        for (const t of res.tools) if (listed.length < MAX_TOOLS_PER_SERVER) listed.push(t);
        cursor = res.nextCursor;
        if (cursor === undefined || listed.length >= MAX_TOOLS_PER_SERVER) break;
      }
      // The chunk that ended the last page may also have passed the line bound.
      if (this.halted()) throw new Error("closed while starting");
      const fits = listed.filter((t) => schemaFits(t.inputSchema));
      // In list order, each tool while the server's specs stay within MCP_MAX_SERVER_SPEC_BYTES in all.
      const kept: ListedTool[] = [];
      const tools: Tool[] = [];
      const overTotal: string[] = [];
      let total = 0;
      for (const t of fits) {
        const tool = this.wrap(t, mcpToolName(this.name, t.name, taken), callTimeoutMs);
        const bytes = compactJsonBytes(tool.spec);
        if (total + bytes > MCP_MAX_SERVER_SPEC_BYTES) {
          taken.delete(tool.spec.name);
          overTotal.push(t.name);
          continue;
        }
        total += bytes;
        kept.push(t);
        tools.push(tool);
      }
      const notes = [
        ...(fits.length < listed.length ? [leftOutNote(listed.filter((t) => !fits.includes(t)).map((t) => t.name))] : []),
        ...(overTotal.length > 0 ? [overTotalNote(overTotal)] : []),
      ];
      if (notes.length > 0) this.error = notes.join("; ");
      this.state = "ready";
      this.raw = kept.map((t) => ({ name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), inputSchema: t.inputSchema }));
      this.toolCount = tools.length;
      return tools;
    } catch (err) {
      const closed = this.closing !== null;
      this.state = "failed";
      this.error = this.overflow ?? (signal.aborted ? `connect timed out after ${timeoutMs} ms` : `connect failed: ${describeError(err)}`.slice(0, 300));
      // A close requested while starting: the process may have been spawned after it ran; stop it now.
      await this.transport.close().catch(() => undefined);
      await this.close();
      this.state = closed ? "closed" : "failed";
      if (closed) delete this.error;
      this.pid = null;
      return [];
    }
  }

  private wrap(t: { name: string; description?: string | undefined; inputSchema: Record<string, unknown> }, modelName: string, callTimeoutMs: number): Tool {
    const inputSchema: Record<string, unknown> = { ...t.inputSchema, type: "object" };
    const description = (t.description ?? `Tool ${t.name} from MCP server ${this.name}.`).slice(0, MAX_DESCRIPTION_CHARS);
    return {
      spec: { name: modelName, description, inputSchema },
      transport: "mcp",
      risk: "network",
      serverName: this.name,
      validate: (args) => {
        if (typeof args !== "object" || args === null || Array.isArray(args)) return { ok: false, message: "(arguments): expected object" };
        const errors = validateJsonSchema(inputSchema, args);
        return errors.length === 0 ? { ok: true, value: args as Record<string, unknown> } : { ok: false, message: errors.join("\n") };
      },
      run: async (args, ctx) => this.call(t.name, modelName, inputSchema, args, ctx.signal, ctx.onProgress, callTimeoutMs),
    };
  }

  private async call(
    toolName: string,
    modelName: string,
    schema: Record<string, unknown>,
    args: Record<string, unknown>,
    signal: AbortSignal,
    onProgress: (line: string) => void,
    timeoutMs: number,
  ): Promise<ToolResult> {
    if (signal.aborted) return fail("cancelled", `${modelName}: cancelled before start`);
    const errors = validateJsonSchema(schema, args);
    if (errors.length > 0) return fail("invalid_arguments", `${modelName}: invalid arguments\n${errors.join("\n")}`);
    if (this.state !== "ready") return fail("unavailable", `${modelName}: MCP server ${this.name} is not available`);
    onProgress("calling");
    try {
      const res = (await this.client.callTool({ name: toolName, arguments: args }, undefined, {
        signal,
        timeout: timeoutMs,
        onprogress: (p) => onProgress(p.total !== undefined ? `progress ${p.progress}/${p.total}` : `progress ${p.progress}`),
      })) as Record<string, unknown>;
      const text = boundText(resultText(res));
      onProgress("done");
      if (res.isError === true) return fail("failed", text.length > 0 ? text : `${modelName}: the tool reported an error`, { timedOut: false });
      return ok(text, { timedOut: false });
    } catch (err) {
      if (signal.aborted) return fail("cancelled", `${modelName}: cancelled`, { timedOut: false });
      if (err instanceof McpError) {
        if (err.code === MCP_REQUEST_TIMEOUT) return fail("limit", `${modelName}: no answer within ${timeoutMs / 1000} s`, { timedOut: true });
        if (err.code === MCP_CONNECTION_CLOSED) return fail("unavailable", `${modelName}: MCP server ${this.name} closed the connection`, { timedOut: false });
        if (err.code === MCP_INVALID_PARAMS) return fail("invalid_arguments", `${modelName}: ${err.message}`, { timedOut: false });
      }
      if (this.state !== "ready") return fail("unavailable", `${modelName}: MCP server ${this.name} is not available`, { timedOut: false });
      return fail("failed", `${modelName}: ${describeError(err)}`, { timedOut: false });
    }
  }

  /** Idempotent; resolves once the server process is gone (or was force-killed). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.stop();
      this.state = "closed";
      this.pid = null;
    })();
    return this.closing;
  }

  /** Stops the process (the client, then the transport) and leaves the state to the caller. Idempotent. */
  private stop(): Promise<void> {
    this.stopping ??= (async () => {
      try {
        await this.client.close();
      } catch {
        // Already closed.
      }
      try {
        await this.transport.close();
      } catch {
        // Already closed.
      }
      this.pid = null;
    })();
    return this.stopping;
  }
}

/**
 * Starts every server concurrently and returns at once; never rejects. `onChange` is called after each server
 * leaves `starting` (ready or failed) and when a ready server fails later (crash, closed connection).
 */
export function startMcpServers(defs: Record<string, McpServerDef>, opts: McpOptions, onChange?: () => void): McpServers {
  const connectTimeout = opts.connectTimeoutMs ?? MCP_DEFAULT_CONNECT_TIMEOUT_MS;
  const callTimeout = opts.callTimeoutMs ?? MCP_DEFAULT_CALL_TIMEOUT_MS;
  // Not a positive integer (NaN would compare as never past it): the default, so the bound always holds.
  const given = opts.maxLineBytes;
  const maxLine = given !== undefined && Number.isSafeInteger(given) && given > 0 ? given : MCP_MAX_LINE_BYTES;
  const names = Object.keys(defs).sort();
  const servers = names.map((n) => new ServerConnection(n, defs[n] as McpServerDef, opts.cwd, maxLine, onChange));
  const listed: Array<Tool[] | null> = servers.map(() => null);
  let merged: Tool[] | null = null;
  const settled = Promise.all(
    servers.map(async (s, i) => {
      listed[i] = await s.connect(connectTimeout, new Set(), callTimeout);
      merged = null;
      try {
        onChange?.();
      } catch {
        // a listener's failure is its own
      }
    }),
  ).then(() => undefined);
  return {
    servers,
    tools: () => (merged ??= mergeTools(listed.filter((l): l is Tool[] => l !== null))),
    listed: (name) => {
      const i = names.indexOf(name);
      const tools = listed[i];
      const raw = servers[i]?.raw;
      return tools === undefined || tools === null || raw === undefined || raw === null ? null : { tools, raw };
    },
    settled,
    close: async () => {
      await Promise.all(servers.map((s) => s.close()));
    },
  };
}

/** Connects to every server concurrently and resolves once each is ready or failed; never rejects. */
export async function connectMcpServers(defs: Record<string, McpServerDef>, opts: McpOptions): Promise<McpConnections> {
  const m = startMcpServers(defs, opts);
  await m.settled;
  return { tools: m.tools(), servers: [...m.servers], close: () => m.close() };
}
