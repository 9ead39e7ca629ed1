/** Runs every JSONL scenario under test/conformance/fixtures/<section>/ against the spawned service. */
import { describe, it } from "node:test";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { FIXTURES } from "../helpers/paths.js";
import { loadScenario, runScenario } from "./harness.js";

for (const section of readdirSync(FIXTURES).sort()) {
  const dir = join(FIXTURES, section);
  if (!statSync(dir).isDirectory()) continue;
  describe(`conformance: ${section}`, { concurrency: 4 }, () => {
    for (const name of readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort()) {
      const s = loadScenario(join(dir, name));
      it(`${s.header.scenario} [${s.header.requirements.join(", ")}]`, { timeout: 60_000 }, () => runScenario(s));
    }
  });
}
