/** Test helpers for MCP side channels: a raw MCP view of an AHP client and a manual clock. */
import type { HostHandle } from "../../src/protocols/host/host.js";
import type { McpClock } from "../../src/protocols/host/mcp-channels.js";
import { AhpClient, until, type Json } from "./helpers.js";

/** An AHP client seen from MCP: requests and notifications on `mcp://` channels, and their replies. */
export class McpClient {
  private constructor(readonly c: AhpClient) {}
  /** Every message received on an `mcp://` channel (validated as MCP by the AHP client). */
  get mcp(): Json[] {
    return this.c.mcp;
  }
  static async open(h: HostHandle, subs: string[] = ["ahp-root://"], clientId = "mcp-client"): Promise<McpClient> {
    const { c } = await AhpClient.init(h, subs, clientId);
    return new McpClient(c);
  }
  /** The MCP view of an AHP client already in use (its AHP checks keep running). */
  static of(c: AhpClient): McpClient {
    return new McpClient(c);
  }
  request(channel: string, id: string | number, method: string, params: Json = {}): void {
    this.c.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params, channel }));
  }
  notify(channel: string, method: string, params: Json = {}): void {
    this.c.ws.send(JSON.stringify({ jsonrpc: "2.0", method, params, channel }));
  }
  async reply(id: string | number, ms = 3000): Promise<Json> {
    let found: Json | undefined;
    await until(() => (found = this.mcp.find((m) => m.id === id && m.method === undefined)) !== undefined, ms, `MCP reply ${String(id)}`);
    return found!;
  }
  replies(): Json[] {
    return this.mcp.filter((m) => m.method === undefined);
  }
  close(): void {
    this.c.close();
  }
}

/** A manual clock for the MCP deadline: timers fire only when `advance` passes them. */
export class ManualClock implements McpClock {
  now = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  get size(): number {
    return this.timers.size;
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [id, t] of [...this.timers].sort((a, b) => a[1].at - b[1].at))
      if (t.at <= this.now && this.timers.delete(id)) t.fn();
  }
}

export const TOOLS_SERVER = {
  id: "workspace-tools",
  uri: "https://example.invalid/mcp",
  name: "Workspace Tools",
  capabilities: { serverTools: true, toolsListChanged: true, serverResources: false, resourcesListChanged: false, logging: false, sampling: false },
};
