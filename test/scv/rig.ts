/**
 * The shared per-suite setup of the SCV tests: one fake provider and Berth home (`startRig`) and one transport
 * over them, opened before the suite's tests and closed after them. Tests read `suite.rig` and `suite.t` inside
 * their bodies (they are set once `before` has run).
 */
import { after, before } from "node:test";
import { openTransport, startRig, type Rig, type Transport, type TransportName } from "./client.js";

export interface RigSuite {
  rig: Rig;
  t: Transport;
}

/** Registers `before`/`after` hooks in the current `describe` for a default rig and a `name` transport. */
export function useRig(name: TransportName): RigSuite {
  const suite = {} as RigSuite;
  before(async () => {
    suite.rig = await startRig();
    suite.t = await openTransport(name, suite.rig);
  });
  after(async () => {
    await suite.t.close();
    await suite.rig.fake.close();
  });
  return suite;
}
