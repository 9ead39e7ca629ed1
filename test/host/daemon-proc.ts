/**
 * Real `berth daemon` processes for the crash-and-restart tests: spawned from bin/berth on a loopback port, resolved
 * with the ready line's AHP endpoint and token once it is printed (rejected with its stderr if it exits first), and
 * killed (SIGKILL) after the test file if still running.
 */
import { after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { AhpClient } from "./helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const bin = fileURLToPath(new URL("../../../bin/berth", import.meta.url));

export interface SpawnedDaemon {
  proc: ChildProcess;
  h: HostHandle;
}

/** A starter of daemons whose leftovers are killed after the calling test file. Call at the file's top level. */
export function daemonStarter(): (env: NodeJS.ProcessEnv, cwd: string) => Promise<SpawnedDaemon> {
  const running = new Set<ChildProcess>();
  after(() => {
    for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  });
  return (env, cwd) => {
    const proc = spawn(process.execPath, [bin, "daemon", "--listen", "127.0.0.1:0"], { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    running.add(proc);
    proc.once("exit", () => running.delete(proc));
    let stderr = "";
    proc.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    return new Promise((resolve, reject) => {
      let buf = "";
      proc.stdout.on("data", (b: Buffer) => {
        buf += b.toString();
        const nl = buf.indexOf("\n");
        if (nl === -1) return;
        const r = JSON.parse(buf.slice(0, nl)) as Record<string, string>;
        resolve({ proc, h: { ahpUrl: r.ahp, httpUrl: r.http, token: r.token, backendSocket: r.backend_socket } as unknown as HostHandle });
      });
      proc.once("exit", (code) => reject(new Error(`daemon exited ${code}: ${stderr}`)));
    });
  };
}

/** Resolves once `p` has exited (at once if it has). */
export const exited = (p: ChildProcess): Promise<void> => new Promise<void>((r) => (p.exitCode !== null || p.signalCode !== null ? r() : p.once("exit", () => r())));

/**
 * Over `c`: a Berth session `session` in `cwd`, ready, with its default chat subscribed and turn `t1` started with the
 * user's `text`; resolves with the chat's URI.
 */
export async function berthTurnStarted(c: AhpClient, session: string, cwd: string, text: string): Promise<string> {
  const r = await c.request("createSession", { channel: session, provider: "berth", workingDirectories: [pathToFileURL(cwd).href] });
  assert.equal(r.result, null, JSON.stringify(r.error));
  const snap = (await c.request("subscribe", { channel: session })).result.snapshot;
  if (snap.state.lifecycle !== "ready") await c.action((e) => e.channel === session && e.action.type === "session/ready", "ready", 10_000);
  const chat: string = snap.state.defaultChat;
  await c.request("subscribe", { channel: chat });
  c.dispatch(chat, { type: "chat/turnStarted", turnId: "t1", startedAt: new Date().toISOString(), message: { text, origin: { kind: "user" } } });
  return chat;
}
