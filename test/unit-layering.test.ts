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
const IO_MODULES = /^(node:)?(fs|fs\/promises|net|child_process|http|https|dgram|tls)$|^(better-sqlite3|write-file-atomic|proper-lockfile|ws)$/;
/** Libraries whose only job is touching files: a protocol adapter never imports them (storage is store/'s). */
const FILE_LIBRARIES = /^(node:)?fs(\/promises)?$|^(better-sqlite3|write-file-atomic|proper-lockfile)$/;

/** A door runs turns only through the session runtime (runtime/session), never the pieces beneath it. */
const TURN_INTERNALS = /\/runtime\/(agent|turn-loop|approval|tool-exec|recorder|history|events|queue)\.js$/;

it("doors reach turns only through runtime/session", () => {
  const violations: string[] = [];
  for (const f of walk(SRC)) {
    const from = layer(f);
    if (from !== "protocols" && from !== "backends") continue;
    const text = readFileSync(f, "utf8");
    for (const m of text.matchAll(/(?:import|export)\s[^'"]*?from\s+["']([^"']+)["']/g)) {
      if (TURN_INTERNALS.test(resolve(dirname(f), m[1]!))) violations.push(`${relative(REPO_ROOT, f)} -> ${m[1]}`);
    }
  }
  assert.deepEqual(violations, []);
});

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
      // protocols/host still prepares its state directory and socket file itself (host.ts, backend.ts).
      else if (from === "protocols" && FILE_LIBRARIES.test(spec) && !(/^(node:)?fs$/.test(spec) && f.includes(`${join("protocols", "host")}`)))
        violations.push(`${relative(REPO_ROOT, f)}: a protocol adapter opens files via ${spec}`);
    }
  }
  assert.deepEqual(violations, []);
});
