/**
 * An in-process app-service server over the given streams with the service methods (`initialize`, …) first and the
 * test's own `families` after them, as the composition root orders them; `run()` starts it.
 */
import type { Readable, Writable } from "node:stream";
import type { LazyFamily, MethodFamily } from "../../src/protocols/app-service/descriptor.js";
import { AppServiceServer } from "../../src/protocols/app-service/server.js";
import { serviceMethods } from "../../src/protocols/app-service/service-methods.js";

export function serverWithServiceMethods(input: Readable, output: Writable, families: Array<MethodFamily | LazyFamily>): AppServiceServer {
  const state = { initialized: false };
  return new AppServiceServer({
    input,
    output,
    state,
    log: () => undefined,
    families: [serviceMethods({ info: { serverName: "berth", serverVersion: "0.0.0", transports: ["stdio"] }, state, providerAuthReady: () => Promise.resolve(false) }), ...families],
  });
}
