/**
 * MCP servers per session (real stdio MCP servers from the fixture, the loopback fake provider, a real store):
 * - two sessions with different servers never restart each other's servers, and each server runs in its
 *   session's cwd;
 * - a turn does not wait for a server still starting past the startup deadline: its first request goes without
 *   that server's tools, which join from the next request once the server is ready;
 * - within the deadline, the first request waits for the server and carries its tools;
 * - a server that fails to start is reported (`watchMcp`, `mcpServers()`), and the turn goes on without it;
 * - a server whose tool list is cached from its last start is not waited for: its tools are offered at once and a
 *   call to one waits for the server;
 * - servers that all have cached lists are not even started before the turn's provider answered (they would compete
 *   with the first request for CPU); a call to one of their tools starts them and runs; a stale cached list is
 *   corrected for the next step (and in the cache).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { SessionHub, type McpServerInfo, type SessionEvent, type SessionRuntime } from "../../src/runtime/session/index.js";
import { collectHubEvents } from "../helpers/hub-events.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));
const server = (...extra: string[]) => ({ command: process.execPath, args: [FIXTURE, ...extra], env: {} });

/** Fixture server processes (children of this process) whose command line includes `tag`. */
function servers(tag: string): Array<{ pid: number; cwd: string }> {
  const out: Array<{ pid: number; cwd: string }> = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== process.pid) continue;
      const cmd = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      if (cmd.includes(FIXTURE) && cmd.includes(tag)) out.push({ pid: Number(d), cwd: readlinkSync(`/proc/${d}/cwd`) });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

interface Rig {
  fake: FakeProvider;
  hub: SessionHub;
  events: SessionEvent[];
  home: string;
  next(pred: (e: SessionEvent) => boolean, from?: number): Promise<SessionEvent>;
  /** Runs one prompt on `rt` to its terminal event. */
  turn(rt: SessionRuntime, prompt: string): Promise<SessionEvent>;
}

async function withRig(fn: (r: Rig) => Promise<void>, agentOpts: { mcpStartupWaitMs?: number; maxIdleMcpRegistries?: number; mcpDeferredStartMs?: number } = {}, approval: "never" | "always" = "never"): Promise<void> {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "mcp-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "mcp-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  const env = { PATH: process.env.PATH, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const manager = new SessionManager(new SessionStore({ home }));
  const hub = new SessionHub({ manager, runner: new Agent({ home, cwd, env, ...agentOpts }), defaults: { cwd, approval } });
  const { events, next } = collectHubEvents(hub);
  const turn = async (rt: SessionRuntime, prompt: string): Promise<SessionEvent> => {
    const from = events.length;
    const r = await rt.startTurn(prompt);
    assert.ok(r.ok, JSON.stringify(r));
    return next((e) => e.sessionId === rt.id && (e.type === "turn_completed" || e.type === "turn_failed" || e.type === "turn_cancelled"), from);
  };
  try {
    await fn({ fake, hub, events, home, next, turn });
  } finally {
    await hub.close();
    await manager.drain();
    await fake.close();
  }
}

/** Resolves once `f()` holds, checked every 25 ms (a process exit has no event to await). */
async function until(f: () => boolean): Promise<void> {
  while (!f()) await new Promise((r) => setTimeout(r, 25));
}

/** Resolves once `rt`'s MCP servers satisfy `pred` (now, or at a later state change reported by `watchMcp`). */
function mcpState(rt: SessionRuntime, pred: (servers: McpServerInfo[]) => boolean): Promise<McpServerInfo[]> {
  return new Promise((resolve) => {
    const now = rt.mcpServers();
    if (now.length > 0 && pred(now)) return resolve(now);
    const off = rt.watchMcp((servers) => {
      if (!pred(servers)) return;
      off();
      resolve(servers);
    });
  });
}

const toolNames = (body: string): string[] => ((JSON.parse(body) as { tools?: Array<{ function: { name: string } }> }).tools ?? []).map((t) => t.function.name);

void test("sessions with different MCP servers never restart each other's servers; each runs in its session's cwd", async () => {
  await withRig(async (r) => {
    const cwdA = realpathSync(mkdtempSync(join(tmpdir(), "mcp-a-")));
    const cwdB = realpathSync(mkdtempSync(join(tmpdir(), "mcp-b-")));
    const tagA = `tag-a-${process.pid}`;
    const tagB = `tag-b-${process.pid}`;
    const a = await r.hub.create({ cwd: cwdA, mcpServers: { alpha: server(tagA) } });
    const b = await r.hub.create({ cwd: cwdB, mcpServers: { beta: server(tagB) } });
    for (const rt of [a, b]) await mcpState(rt, (servers) => servers.every((s) => s.state === "ready"));
    const [sa] = servers(tagA);
    const [sb] = servers(tagB);
    assert.ok(sa !== undefined && sb !== undefined, "each session's server runs");
    assert.equal(sa.cwd, cwdA, "session A's server starts in session A's cwd");
    assert.equal(sb.cwd, cwdB, "session B's server starts in session B's cwd");

    let n = r.fake.requests.length;
    for (const rt of [a, b, a, b]) assert.equal((await r.turn(rt, "hi")).type, "turn_completed");
    const bodies = r.fake.requests.slice(n).map((q) => toolNames(q.body));
    assert.ok(bodies[0]!.includes("mcp__alpha__echo") && !bodies[0]!.includes("mcp__beta__echo"));
    assert.ok(bodies[1]!.includes("mcp__beta__echo") && !bodies[1]!.includes("mcp__alpha__echo"));
    assert.deepEqual(servers(tagA), [sa], "alternating turns left session A's server running (same process)");
    assert.deepEqual(servers(tagB), [sb], "alternating turns left session B's server running (same process)");
    assert.deepEqual(
      a.mcpServers().map((s) => [s.name, s.state, s.toolCount > 0]),
      [["alpha", "ready", true]],
    );

    // Closing one session stops its servers only.
    await r.hub.closeSession(a.id);
    await until(() => servers(tagA).length === 0);
    assert.deepEqual(servers(tagB), [sb]);
    n = r.fake.requests.length;
    assert.equal((await r.turn(b, "still there?")).type, "turn_completed");
    assert.ok(toolNames(r.fake.requests[n]!.body).includes("mcp__beta__echo"));
  });
});

void test("past the startup deadline the first request goes without a starting server; its tools join from the next request", async () => {
  await withRig(
    async (r) => {
      const gate = join(mkdtempSync(join(tmpdir(), "mcp-gate-")), "go");
      const rt = await r.hub.create({ mcpServers: { slow: server(`--wait-for=${gate}`) } });
      r.fake.script([{ steps: [{ toolCall: { id: "c1", name: "ls", arguments: {} } }] }, { steps: [{ text: "done" }] }]);
      const from = r.events.length;
      const started = await rt.startTurn("list, then use the slow server");
      assert.ok(started.ok);
      // The first request went out while the server was still starting (deadline 0): no slow-server tools.
      await r.next((e) => e.type === "approval_requested", from);
      assert.equal(rt.mcpServers()[0]?.state, "starting");
      const first = toolNames(r.fake.requests.at(-1)!.body);
      assert.ok(first.includes("ls") && !first.some((t) => t.startsWith("mcp__slow__")), first.join(","));
      // The server becomes ready while the turn waits for the approval; the next request offers its tools.
      writeFileSync(gate, "");
      await mcpState(rt, (servers) => servers[0]?.state === "ready");
      const pending = rt.pendingApprovals();
      assert.equal(pending.length, 1);
      assert.ok(rt.resolveApproval(pending[0]!, true));
      const end = await r.next((e) => e.type === "turn_completed" || e.type === "turn_failed", from);
      assert.equal(end.type, "turn_completed");
      assert.ok(toolNames(r.fake.requests.at(-1)!.body).includes("mcp__slow__echo"), "the ready server's tools join the next request");
    },
    { mcpStartupWaitMs: 0 },
    "always",
  );
});

void test("within the startup deadline the first request waits for a starting server and offers its tools", async () => {
  await withRig(
    async (r) => {
      const gate = join(mkdtempSync(join(tmpdir(), "mcp-gate-")), "go");
      const rt = await r.hub.create({ mcpServers: { slow: server(`--wait-for=${gate}`) } });
      const from = r.events.length;
      const started = await rt.startTurn("use the slow server");
      assert.ok(started.ok);
      await r.next((e) => e.type === "turn_started", from);
      await mcpState(rt, (servers) => servers[0]?.state === "starting");
      assert.equal(rt.mcpServers()[0]?.state, "starting");
      const n = r.fake.requests.length;
      writeFileSync(gate, "");
      const end = await r.next((e) => e.type === "turn_completed" || e.type === "turn_failed", from);
      assert.equal(end.type, "turn_completed");
      assert.ok(toolNames(r.fake.requests[n]!.body).includes("mcp__slow__echo"), "the first request carries the server's tools");
    },
    { mcpStartupWaitMs: 600_000 },
  );
});

void test("a server that fails to start is reported and the session's turns go on without it", async () => {
  await withRig(async (r) => {
    const rt = await r.hub.create({ mcpServers: { good: server(), broken: server("--exit-at-start") } });
    const st = await mcpState(rt, (servers) => servers.every((s) => s.state !== "starting"));
    const broken = st.find((s) => s.name === "broken");
    assert.equal(broken?.state, "failed");
    assert.match(broken?.error ?? "", /connect failed/);
    assert.equal(st.find((s) => s.name === "good")?.state, "ready");
    assert.deepEqual(
      rt.mcpServers().map((s) => [s.name, s.state]),
      [
        ["broken", "failed"],
        ["good", "ready"],
      ],
    );
    const n = r.fake.requests.length;
    assert.equal((await r.turn(rt, "hi")).type, "turn_completed");
    const names = toolNames(r.fake.requests[n]!.body);
    assert.ok(names.includes("mcp__good__echo") && !names.some((t) => t.startsWith("mcp__broken__")));
  });
});

void test("a server with a cached tool list is not waited for: its tools are offered at once and a call waits for it", async () => {
  await withRig(
    async (r) => {
      const gate = join(mkdtempSync(join(tmpdir(), "mcp-gate-")), "go");
      const def = { slow: server(`--wait-for=${gate}`) };
      // First start: no cache yet; once ready, its tool list is cached.
      const a = await r.hub.create({ mcpServers: def });
      writeFileSync(gate, "");
      await mcpState(a, (servers) => servers[0]?.state === "ready");
      const cacheDir = join(r.home, "state", "mcp-tools");
      assert.equal(readdirSync(cacheDir).filter((f) => f.endsWith(".json")).length, 1);
      const cached = readFileSync(join(cacheDir, readdirSync(cacheDir).find((f) => f.endsWith(".json"))!), "utf8");
      assert.ok(!cached.includes(gate), "the cache file holds tools, not the server definition");
      unlinkSync(gate);
      await r.hub.closeSession(a.id);

      // Second start of the same definition in the same cwd: starting, yet the first request offers its tools.
      const b = await r.hub.create({ mcpServers: def });
      r.fake.script([{ steps: [{ toolCall: { id: "e1", name: "mcp__slow__echo", arguments: { text: "hi" } } }] }, { steps: [{ text: "done" }] }]);
      const from = r.events.length;
      const n = r.fake.requests.length;
      const started = await b.startTurn("echo hi");
      assert.ok(started.ok);
      await r.fake.waitForRequests(n + 1);
      assert.ok(toolNames(r.fake.requests[n]!.body).includes("mcp__slow__echo"), "cached tools are offered while the server starts");
      assert.equal(b.mcpServers()[0]?.state, "starting", "the first request did not wait for the server (deadline 10 min)");
      // The call waits for its server; once it is ready the call runs on the live tool.
      await r.next((e) => e.type === "tool_started", from);
      writeFileSync(gate, "");
      const done = await r.next((e) => e.type === "tool_completed", from);
      assert.ok(done.type === "tool_completed");
      assert.equal(done.success, true);
      assert.equal(done.output, "echo: hi");
      assert.equal((await r.next((e) => e.type === "turn_completed" || e.type === "turn_failed", from)).type, "turn_completed");
    },
    { mcpStartupWaitMs: 600_000 },
  );
});

void test("servers with cached lists start once the provider answered; a call to their tool works; a stale list is corrected", async () => {
  await withRig(
    async (r) => {
      const tag = `defer-${process.pid}`;
      const def = { s: server(tag) };
      // First start (nothing cached): at once; its list is cached once it is ready.
      const a = await r.hub.create({ mcpServers: def });
      await mcpState(a, (xs) => xs[0]?.state === "ready");
      await r.hub.closeSession(a.id);
      await until(() => servers(tag).length === 0);
      const cacheDir = join(r.home, "state", "mcp-tools");
      const [cacheFile] = readdirSync(cacheDir).filter((f) => f.endsWith(".json"));
      assert.ok(cacheFile !== undefined);
      const file = join(cacheDir, cacheFile);

      // Second start: the provider holds its answer; the request carries the cached tools, no server is spawned.
      let release!: () => void;
      const hold = new Promise<void>((res) => (release = res));
      r.fake.script([{ steps: [{ hold }, { toolCall: { id: "e1", name: "mcp__s__echo", arguments: { text: "hi" } } }] }, { steps: [{ text: "done" }] }]);
      const b = await r.hub.create({ mcpServers: def });
      const from = r.events.length;
      const n = r.fake.requests.length;
      assert.ok((await b.startTurn("echo hi")).ok);
      await r.fake.waitForRequests(n + 1);
      assert.ok(toolNames(r.fake.requests[n]!.body).includes("mcp__s__echo"), "the cached tools are offered");
      // Another session's uncached server loads the MCP client and starts: a server started at open would run by now.
      const other = `defer-other-${process.pid}`;
      const c = await r.hub.create({ mcpServers: { o: server(other) } });
      await mcpState(c, (xs) => xs[0]?.state === "ready");
      assert.equal(servers(tag).length, 0, "not spawned before the provider answered");
      assert.equal(b.mcpServers()[0]?.state, "starting");
      release();
      const done = await r.next((e) => e.type === "tool_completed", from);
      assert.ok(done.type === "tool_completed" && done.success, JSON.stringify(done));
      assert.equal(done.output, "echo: hi");
      assert.equal((await r.next((e) => (e.type === "turn_completed" || e.type === "turn_failed") && e.sessionId === b.id, from)).type, "turn_completed");
      assert.equal(servers(tag).length, 1);
      await r.hub.closeSession(b.id);
      await until(() => servers(tag).length === 0);

      // A stale cached list (a tool the server no longer offers): the call ends unavailable, the next step and the
      // cache carry the live list.
      const cached = JSON.parse(readFileSync(file, "utf8")) as { tools: unknown[] };
      writeFileSync(file, JSON.stringify({ tools: [...cached.tools, { name: "vanished", description: "Gone.", inputSchema: { type: "object" } }] }));
      r.fake.script([{ steps: [{ toolCall: { id: "v1", name: "mcp__s__vanished", arguments: {} } }] }, { steps: [{ text: "done" }] }]);
      const d = await r.hub.create({ mcpServers: def });
      const from2 = r.events.length;
      const m = r.fake.requests.length;
      assert.ok((await d.startTurn("call it")).ok);
      const gone = await r.next((e) => e.type === "tool_completed", from2);
      assert.ok(gone.type === "tool_completed" && !gone.success);
      // Whether the server got ready before the call ran (unknown tool) or while it waited (no longer offers it).
      assert.match(gone.output, /^unknown tool: mcp__s__vanished$|MCP server s no longer offers this tool/);
      assert.equal((await r.next((e) => (e.type === "turn_completed" || e.type === "turn_failed") && e.sessionId === d.id, from2)).type, "turn_completed");
      assert.ok(toolNames(r.fake.requests[m]!.body).includes("mcp__s__vanished"), "the first request offered the cached list");
      const next = toolNames(r.fake.requests[m + 1]!.body);
      assert.ok(next.includes("mcp__s__echo") && !next.includes("mcp__s__vanished"), "the next step offers the live list");
      assert.ok(!readFileSync(file, "utf8").includes("vanished"), "the cache holds the live list");
    },
    { mcpStartupWaitMs: 600_000, mcpDeferredStartMs: 600_000 },
  );
});

void test("idle sessions keep at most the bound of MCP server sets; the least recently used closes and restarts on use", async () => {
  await withRig(
    async (r) => {
      const tag = (x: string) => `idle-${x}-${process.pid}`;
      const a = await r.hub.create({ mcpServers: { s: server(tag("a")) } });
      await mcpState(a, (servers) => servers[0]?.state === "ready");
      const b = await r.hub.create({ mcpServers: { s: server(tag("b")) } });
      await mcpState(b, (servers) => servers[0]?.state === "ready");
      // At the bound (one idle set besides the one being taken): nothing closes.
      assert.equal(servers(tag("a")).length, 1);
      assert.equal(servers(tag("b")).length, 1);
      const c = await r.hub.create({ mcpServers: { s: server(tag("c")) } });
      await mcpState(c, (servers) => servers[0]?.state === "ready");
      // One past it: the least recently used set (session A's) closes (its process exits shortly after).
      await until(() => servers(tag("a")).length === 0);
      assert.equal(servers(tag("b")).length, 1);
      assert.equal(servers(tag("c")).length, 1);
      // Session A's next turn starts its servers again and offers their tools.
      const n = r.fake.requests.length;
      assert.equal((await r.turn(a, "back")).type, "turn_completed");
      assert.ok(toolNames(r.fake.requests[n]!.body).includes("mcp__s__echo"));
      // Offered from the cached list; the servers start shortly after the provider's first event.
      await until(() => servers(tag("a")).length === 1);
    },
    { maxIdleMcpRegistries: 1, mcpStartupWaitMs: 600_000 },
  );
});
