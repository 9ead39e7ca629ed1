/**
 * The end-to-end rig for provider `berth`: a host, Berth's runtime adapter on its backend socket,
 * an `Agent` pointed at the loopback fake provider, and small AHP helpers shared by the tests.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { berthHomeFor, until, withHost, type AhpClient, type Json } from "./helpers.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { startBerthRuntime, type BerthRuntimeBackend } from "../../src/backends/berth/backend.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { BackendTap } from "./backend-tap.js";

export interface World {
  h: HostHandle;
  rt: BerthRuntimeBackend;
  fake: FakeProvider;
  cwd: string;
  berthHome: string;
  /** With `tap`: the tap the runtime reaches the host through. */
  tap?: BackendTap;
}

export async function withBerth(fn: (w: World) => Promise<void>, opts: { home?: string; berthHome?: string; fake?: FakeProvider; historyPage?: number; historyWindowBytes?: number; tap?: boolean; disposeWaitMs?: number; log?: (msg: string) => void } = {}): Promise<void> {
  const fake = opts.fake ?? (await startFakeProvider());
  const berthHome = opts.berthHome ?? berthHomeFor(fake);
  const cwd = mkdtempSync(join(tmpdir(), "bh-cwd-"));
  const env = { PATH: process.env.PATH, MC_HOME: berthHome, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  try {
    await withHost(
      async (h) => {
        let backend: BerthRuntimeBackend | null = null;
        const tap = opts.tap === true ? await BackendTap.start(h.backendSocket) : undefined;
        const rt = await startBerthRuntime({
          socketPath: tap?.path ?? h.backendSocket,
          manager: new SessionManager(new SessionStore({ home: berthHome })),
          runner: new Agent({ home: berthHome, cwd, env, sessionTools: (s) => backend?.sessionTools(s) ?? [] }),
          ...(opts.historyPage !== undefined ? { historyPage: opts.historyPage } : {}),
          ...(opts.historyWindowBytes !== undefined ? { historyWindowBytes: opts.historyWindowBytes } : {}),
          ...(opts.disposeWaitMs !== undefined ? { disposeWaitMs: opts.disposeWaitMs } : {}),
          cwd,
          registryPath: join(h.stateDir, "berth-runtime.json"),
          log: (m) => {
            opts.log?.(m);
            if (process.env.DEBUG_BERTH) process.stderr.write(`rt: ${m}\n`);
          },
        });
        backend = rt;
        try {
          await fn({ h, rt, fake, cwd, berthHome, ...(tap ? { tap } : {}) });
        } finally {
          await rt.close();
          await tap?.close();
        }
      },
      opts.home ? { home: opts.home } : {},
    );
  } finally {
    if (!opts.fake) await fake.close();
  }
}

/** createSession with provider berth; resolves with the session and its chat once ready. */
export async function newSession(c: AhpClient, uri: string, cwd: string): Promise<{ session: string; chat: string }> {
  const r = await c.request("createSession", { channel: uri, provider: "berth", workingDirectories: [pathToFileURL(cwd).href] });
  assert.equal(r.result, null, JSON.stringify(r.error));
  // The session exists (creating or already claimed) once createSession answered.
  const snap = (await c.request("subscribe", { channel: uri })).result.snapshot;
  if (snap.state.lifecycle !== "ready") await c.action((e) => e.channel === uri && e.action.type === "session/ready", "session/ready", 10_000);
  const chat: string = snap.state.defaultChat;
  await c.request("subscribe", { channel: chat });
  return { session: uri, chat };
}

export const user = (text: string): Json => ({ text, origin: { kind: "user" } });
export const startTurn = (c: AhpClient, chat: string, turnId: string, text: string): number =>
  c.dispatch(chat, { type: "chat/turnStarted", turnId, startedAt: new Date().toISOString(), message: user(text) });
export const ended = (c: AhpClient, turnId: string): Promise<Json> =>
  c.action((e) => ["chat/turnComplete", "chat/turnCancelled", "chat/error"].includes(e.action.type) && e.action.turnId === turnId, `end of ${turnId}`, 15_000);

/** The runtime's `settled` for a host-cancelled turn has arrived (nothing is draining). */
export function waitIdle(h: HostHandle, session: string): Promise<void> {
  const s = h.state.sessions.get(session)!;
  return until(() => !h.state.chatIndex.get(s.primaryChat)!.draining, 10_000, "the runtime settling the cancelled turn");
}

/** True while a process with this PID exists (signal 0 only checks). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Start turn `turnId` on `chat` whose bash tool ignores SIGTERM (cancelling the turn ends it only with the bash
 * tool's SIGKILL, after its 2 s grace), approve it, and wait until it runs; a further turn is scripted for after the
 * tool. Its PID.
 */
export async function runStubbornTool(c: AhpClient, fake: FakeProvider, chat: string, cwd: string, turnId = "t1"): Promise<number> {
  const pidFile = join(cwd, "tool.pid");
  const command = `trap '' TERM; echo $$ > tool.pid.tmp; mv tool.pid.tmp tool.pid; while :; do sleep 0.05; done`;
  fake.script([{ steps: [{ text: "Running it. " }, { toolCall: { id: "b1", name: "bash", arguments: { command } } }] }, { steps: [{ text: "after the tool" }] }]);
  startTurn(c, chat, turnId, "run the tool");
  const ready = await c.action((e) => e.channel === chat && e.action.type === "chat/toolCallReady" && e.action.turnId === turnId, "bash ready", 15_000);
  c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId, toolCallId: ready.action.toolCallId, approved: true, confirmed: "user-action" });
  await until(() => existsSync(pidFile), 15_000, "the tool running");
  return Number(readFileSync(pidFile, "utf8").trim());
}
