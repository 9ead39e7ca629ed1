/**
 * The SCV composition root shared by `berth stdio` and the daemon socket: the runtime, the durable session store and
 * the session opener handed to every connection.
 */
import type { EnvLike } from "../store/home.js";
import type { ScvServerDeps } from "../protocols/scv/connection.js";
import { packageVersion } from "./service.js";

export interface ScvDepsOptions {
  home: string;
  env: EnvLike;
  transport: "stdio" | "socket";
  log: (line: string) => void;
  daemonControl?: ScvServerDeps["daemonControl"];
}

export async function buildScvDeps(o: ScvDepsOptions): Promise<{ deps: ScvServerDeps; close(): Promise<void> }> {
  await Promise.resolve();
  const deps: ScvServerDeps = {
    server: { name: "berth", version: packageVersion() },
    openSession: () => Promise.resolve({ code: "unsupported", message: "sessions are not available yet" }),
    log: o.log,
    ...(o.daemonControl !== undefined ? { daemonControl: o.daemonControl } : {}),
  };
  return { deps, close: () => Promise.resolve() };
}
