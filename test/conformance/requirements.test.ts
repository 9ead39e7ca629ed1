/**
 * Requirement coverage: every requirement ID in test/conformance/requirements/*.json must be cited by a
 * scenario header or by a `@req <ID>` tag in a test source file. An uncited requirement fails this test.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/paths.js";
import { loadScenario } from "./harness.js";

function walk(dir: string, out: string[] = []): string[] {
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

test("every requirement is cited by a scenario or a @req-tagged test", () => {
  const reqDir = join(REPO_ROOT, "test", "conformance", "requirements");
  const required = new Map<string, string>();
  for (const f of readdirSync(reqDir).filter((n) => n.endsWith(".json")))
    for (const [id, text] of Object.entries(JSON.parse(readFileSync(join(reqDir, f), "utf8")) as Record<string, string>)) {
      assert.ok(!required.has(id), `duplicate requirement ${id}`);
      required.set(id, text);
    }
  const cited = new Set<string>();
  const files = walk(join(REPO_ROOT, "test"));
  for (const f of files) {
    if (f.endsWith(".jsonl") && f.includes(join("conformance", "fixtures"))) for (const r of loadScenario(f).header.requirements) cited.add(r);
    if (f.endsWith(".ts")) for (const m of readFileSync(f, "utf8").matchAll(/@req\s+([A-Z][A-Z0-9-]+)/g)) cited.add(m[1]!);
  }
  const unknown = [...cited].filter((c) => !required.has(c));
  assert.deepEqual(unknown, [], "cited requirement IDs that the manifest does not define");
  const missing = [...required.keys()].filter((id) => !cited.has(id));
  assert.deepEqual(missing, [], "requirements no test cites");
});
