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
/**
 * Libraries that touch files, processes or sockets. `core` imports none of them (nor http/https/ws); a protocol
 * adapter (`protocols/`) imports none of them either: files and databases are `store/`'s, sockets and processes
 * `transport/`'s or `cli/`'s. Type-only imports (`import type`) do no I/O and are allowed.
 */
const IO_LIBRARIES = /^(node:)?(fs|fs\/promises|child_process|net|dgram|tls|worker_threads|cluster)$|^(better-sqlite3|proper-lockfile|write-file-atomic)$/;
const CORE_ALSO = /^(node:)?(http|https|http2|readline)$|^ws$/;

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
    for (const m of text.matchAll(/(?:import|export)\s+(type\s)?[^'"]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
      const typeOnly = m[1] !== undefined;
      const spec = (m[2] ?? m[3])!;
      if (spec.startsWith(".")) {
        const to = layer(resolve(dirname(f), spec));
        if (FORBIDDEN[from]?.includes(to)) violations.push(`${relative(REPO_ROOT, f)} -> ${spec}`);
      } else if (typeOnly) continue;
      else if (from === "core" && (IO_LIBRARIES.test(spec) || CORE_ALSO.test(spec))) violations.push(`${relative(REPO_ROOT, f)} does I/O via ${spec}`);
      else if (from === "protocols" && IO_LIBRARIES.test(spec)) violations.push(`${relative(REPO_ROOT, f)}: a protocol adapter does I/O via ${spec}`);
    }
  }
  assert.deepEqual(violations, []);
});
