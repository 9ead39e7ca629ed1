/**
 * Layering invariants (MCP's layeringInvariants idea): imports point one way.
 * core <- store/runtime <- protocols <- cli; transport depends only on core; core does no I/O;
 * protocol adapters never open files; the runtime never imports a protocol.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, dirname, resolve } from "node:path";
import { REPO_ROOT } from "./helpers/paths.js";

const SRC = join(REPO_ROOT, "src");
function walk(d: string, out: string[] = []): string[] {
  for (const n of readdirSync(d)) {
    const p = join(d, n);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (n.endsWith(".ts")) out.push(p);
  }
  return out;
}
const layer = (file: string) => relative(SRC, file).split("/")[0]!;
const FORBIDDEN: Record<string, string[]> = {
  core: ["store", "runtime", "protocols", "transport", "client", "cli", "backends"],
  transport: ["store", "runtime", "protocols", "client", "cli", "backends"],
  store: ["runtime", "protocols", "transport", "client", "cli", "backends"],
  runtime: ["protocols", "transport", "client", "cli", "backends"],
  protocols: ["cli", "client", "backends"],
  client: ["cli", "runtime", "store", "backends"],
  // A backend (Berth's runtime served to the host) is a client of the host's wire: never of its code.
  backends: ["protocols", "cli", "client"],
};
const IO_MODULES = /^(node:)?(fs|fs\/promises|net|child_process|http|https|dgram|tls)$/;

it("imports point one way and core does no I/O", () => {
  const violations: string[] = [];
  for (const f of walk(SRC)) {
    const from = layer(f);
    const text = readFileSync(f, "utf8");
    for (const m of text.matchAll(/(?:import|export)\s[^'"]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
      const spec = (m[1] ?? m[2])!;
      if (spec.startsWith(".")) {
        const to = layer(resolve(dirname(f), spec));
        if (FORBIDDEN[from]?.includes(to)) violations.push(`${relative(REPO_ROOT, f)} -> ${spec}`);
      } else if (from === "core" && IO_MODULES.test(spec)) violations.push(`${relative(REPO_ROOT, f)} does I/O via ${spec}`);
      else if (from === "protocols" && /^(node:)?fs(\/promises)?$/.test(spec) && !f.includes(`${join("protocols", "host")}`))
        violations.push(`${relative(REPO_ROOT, f)}: a protocol adapter opens files via ${spec}`);
    }
  }
  assert.deepEqual(violations, []);
});
