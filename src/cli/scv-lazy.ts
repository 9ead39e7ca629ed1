/**
 * `berth stdio`'s SCV dependencies without their load cost at startup: the handshake (`initialize`) needs only the
 * server's name, version and timings, so the heavy composition root (scv-deps.ts: agent, session store, hub,
 * delegates) loads in the background after the first input arrives and `session.start` awaits it. A failure to build
 * it refuses `session.start` with `internal_error` (and a diagnostic line) instead of failing the handshake.
 */
import type { Writable } from "node:stream";
import { buildProblem } from "../core/build-problem.js";
import type { EnvLike } from "../store/home.js";
import { CLEANUP_GRACE_MS, SEND_TIMEOUT_MS, type ScvServerDeps } from "../protocols/scv/connection.js";
import { packageVersion } from "./process-io.js";
import { mark } from "../runtime/debug-timing.js";
import type { ScvDepsOptions } from "./scv-deps.js";

/** A test seam in milliseconds from the environment, clamped to 50 ms … 10 min; `dflt` when unset or invalid. */
export function envMs(env: EnvLike, name: string, dflt: number): number {
  const v = Number(env[name]);
  return Number.isFinite(v) && v > 0 ? Math.min(Math.max(Math.round(v), 50), 600_000) : dflt;
}

export function scvTimings(env: EnvLike): { sendTimeoutMs: number; graceMs: number } {
  return { sendTimeoutMs: envMs(env, "BERTH_SCV_SEND_TIMEOUT_MS", SEND_TIMEOUT_MS), graceMs: envMs(env, "BERTH_SCV_CLEANUP_GRACE_MS", CLEANUP_GRACE_MS) };
}

type Built = Awaited<ReturnType<typeof import("./scv-deps.js").buildScvDeps>>;

/**
 * Deps whose `openSession` builds the real ones on first need. `preloadAfterFirstWrite(output)` starts building in
 * the check phase after the first frame (the handshake's answer) was handed to `output`, so a prompt finds the turn
 * path loaded. Not on the first input chunk: the connection's writer flushes in a check phase too, and a build
 * queued from the input's `data` event ran first, holding the `initialized` frame back for the whole synchronous
 * part of the load (~8 ms of `spawn → initialize answered`). The build itself is two steps (above `build`).
 */
export function lazyScvDeps(o: ScvDepsOptions): { deps: ScvServerDeps; preloadAfterFirstWrite(output: Writable): void; close(): Promise<void> } {
  let built: Promise<Built> | null = null;
  // The agent and hub modules (the larger half) load one event-loop turn after the stores: a `session.start` that
  // arrived meanwhile is read first and starts its file's creation and fsyncs, and the load then runs inside their
  // wait instead of ahead of them (`session.start` also starts the load itself right after the creation).
  const build = (): Promise<Built> =>
    (built ??= (mark("scv.deps_load"), import("./scv-deps.js"))
      .then((m) => (mark("scv.deps_loaded"), m.buildScvDeps({ ...o, deferRuntime: true })))
      .then((b) => (mark("scv.deps_built"), setImmediate(() => b.loadRuntime()), b)));
  const deps: ScvServerDeps = {
    server: { name: "berth", version: packageVersion() },
    ...scvTimings(o.env),
    log: o.log,
    async openSession(msg, out) {
      let real: Built;
      try {
        real = await build();
      } catch (err) {
        o.log(`the session host could not start (${buildProblem(err) ?? (err instanceof Error ? err.name : "error")})`);
        return { code: "internal_error", message: "the session host could not start; see stderr", request_id: msg.request_id };
      }
      return real.deps.openSession(msg, out);
    },
  };
  return {
    deps,
    preloadAfterFirstWrite(output) {
      const write = output.write.bind(output) as (...args: unknown[]) => boolean;
      output.write = ((...args: unknown[]): boolean => {
        output.write = write as Writable["write"];
        setImmediate(() => void build().catch(() => undefined));
        return write(...args);
      }) as Writable["write"];
    },
    async close() {
      if (built === null) return;
      const real = await built.catch(() => null);
      await real?.close();
    },
  };
}
