/**
 * A fake host for the in-process Berth backend (src/backends/berth/): a Unix socket that answers `provider_hello`
 * and `ping` and otherwise only records what the backend writes, so a test can send it any host frame, even one
 * the real host's wire validation would never let through. `withBackend` starts the backend on it (an `Agent`
 * on the loopback fake provider) and checks afterwards that nothing was logged as a bug.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { startBerthRuntime, type BerthRuntimeBackend } from "../../src/backends/berth/backend.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { attachLineReader, encodeFrame } from "../../src/transport/host-framing.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { berthHomeFor, until, type Json } from "../host/helpers.js";

/** The fake host: one backend connection, frames recorded, raw lines sent. */
export class FakeHost {
  readonly frames: Json[] = [];
  /** `command_result` frames by commandId, as they arrive: the checks look them up instead of scanning every frame. */
  readonly resultsById = new Map<string, Json[]>();
  /** For each result, how many distinct commandIds had been answered when it arrived (the backend remembers the last 4,096). */
  readonly answeredBefore = new Map<Json, number>();
  sock?: Socket;
  badFrames = 0;
  connections = 0;
  private constructor(
    readonly server: Server,
    readonly path: string,
  ) {}
  static async start(): Promise<FakeHost> {
    const path = join(mkdtempSync(join(tmpdir(), "bfz-")), "backend.sock");
    const server = createServer();
    const h = new FakeHost(server, path);
    server.on("connection", (s) => {
      h.sock = s;
      h.connections++;
      s.on("error", () => undefined);
      attachLineReader(s, {
        onFrame: (f) => {
          h.frames.push(f);
          if (f.type === "command_result" && typeof f.commandId === "string") {
            const seen = h.resultsById.get(f.commandId);
            if (seen === undefined) h.resultsById.set(f.commandId, [f]);
            else seen.push(f);
            h.answeredBefore.set(f, h.resultsById.size);
          }
          if (process.env.FUZZ_VERBOSE) process.stderr.write(`<< ${JSON.stringify(f).slice(0, 200)}\n`);
          if (f.type === "provider_hello") h.raw(JSON.stringify({ type: "provider_registered", protocolVersion: 9 }));
          // Answered like the host does, so `rt.sync()` gives tests an ordered marker.
          if (f.type === "ping") h.send({ type: "pong", id: f.id });
        },
        onError: () => h.badFrames++,
      });
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    return h;
  }
  raw(line: string): void {
    this.sock?.write(line + "\n");
  }
  send(f: Json): void {
    this.sock?.write(encodeFrame(f));
  }
  async close(): Promise<void> {
    this.sock?.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export interface Rig {
  host: FakeHost;
  rt: BerthRuntimeBackend;
  logs: string[];
  results: (id: string) => Json[];
  /** Creates and registers a session; returns its URI, logical ID and primary chat. */
  session: (n: string) => Promise<{ uri: string; logical: string; chat: string }>;
}

/** A fake host with the Berth backend registered on it; checks afterwards that nothing was logged as a bug. */
export async function withBackend(fn: (w: Rig) => Promise<void>, label = "berth backend"): Promise<void> {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  const cwd = mkdtempSync(join(tmpdir(), "bfz-cwd-"));
  const host = await FakeHost.start();
  const logs: string[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown): void => void unhandled.push(e);
  process.on("unhandledRejection", onUnhandled);
  const env = { PATH: process.env.PATH, MC_HOME: berthHome, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const rt = await startBerthRuntime({
    socketPath: host.path,
    manager: new SessionManager(new SessionStore({ home: berthHome })),
    runner: new Agent({ home: berthHome, cwd, env }),
    cwd,
    registryPath: join(mkdtempSync(join(tmpdir(), "bfz-reg-")), "berth-runtime.json"),
    log: (m) => {
      logs.push(m);
      if (process.env.FUZZ_VERBOSE) process.stderr.write(`log: ${m}\n`);
    },
  });
  const results = (id: string): Json[] => host.resultsById.get(id) ?? [];
  const session = async (n: string): Promise<{ uri: string; logical: string; chat: string }> => {
    const uri = `ahp-session:/${n}`;
    host.send({ type: "provider_command", commandId: `create-${n}`, backendInstanceId: rt.instanceId, command: { type: "create_session", session: uri, creationToken: `tok-${n}`, workingDirectories: [pathToFileURL(cwd).href] } });
    await until(() => results(`create-${n}`).length > 0, 10_000, `create ${n}`);
    assert.equal(results(`create-${n}`)[0]!.accepted, true);
    let reg: Json | undefined;
    await until(() => (reg = host.frames.find((f) => f.type === "register_session" && (f.hello as Json).requestedSession === uri)) !== undefined, 10_000, `register ${n}`);
    const logical = `L-${n}`;
    const chat = `ahp-chat:/${n}-main`;
    host.send({ type: "session_registered", requestId: reg!.requestId, session: uri, backendConnectionId: logical, chat });
    // The registration has been handled once a command on the session is answered as routed.
    host.send({ type: "command", commandId: `probe-${n}`, backendInstanceId: rt.instanceId, session: uri, backendConnectionId: logical, command: { type: "abort" } });
    await until(() => results(`probe-${n}`).length > 0, 10_000, `registration of ${n}`);
    assert.equal(results(`probe-${n}`)[0]!.accepted, true);
    return { uri, logical, chat };
  };
  try {
    await fn({ host, rt, logs, results, session });
  } finally {
    await rt.close();
    await host.close();
    await fake.close();
    process.off("unhandledRejection", onUnhandled);
  }
  assert.deepEqual(unhandled.map(String), [], `${label}: unhandled rejections`);
  const bugs = logs.filter((m) => /bug|internal|TypeError|RangeError/i.test(m));
  assert.deepEqual(bugs, [], `${label}: the backend logged bugs`);
  assert.equal(host.badFrames, 0, "the backend wrote only valid frames");
}
