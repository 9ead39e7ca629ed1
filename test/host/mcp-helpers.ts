/** Test helpers for MCP side channels: a raw MCP view of an AHP client and a manual clock. */
import type { HostHandle } from "../../src/protocols/host/host.js";
import type { McpClock } from "../../src/protocols/host/mcp-channels.js";
import { AhpClient, until, type Json } from "./helpers.js";
import { wsText } from "../../src/transport/ws-text.js";

/** An AHP client that also records every message carrying a top-level `mcp://` channel. */
export class McpClient {
  readonly mcp: Json[] = [];
  private constructor(readonly c: AhpClient) {
    c.ws.on("message", (d) => {
      const m = JSON.parse(wsText(d)) as Json;
      if (typeof m.channel === "string" && m.channel.startsWith("mcp://")) this.mcp.push(m);
    });
  }
  static async open(h: HostHandle, subs: string[] = ["ahp-root://"], clientId = "mcp-client"): Promise<McpClient> {
    const { c } = await AhpClient.init(h, subs, clientId);
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
