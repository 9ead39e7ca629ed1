/**
 * The ACP SDK stays off every other command's path: no module reachable (statically or lazily) from `berth service`,
 * `berth daemon`, `berth chat` or `magi-code` imports `@agentclientprotocol/sdk`; only `berth acp` loads it.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { REPO_ROOT } from "../helpers/paths.js";

const SDK = "@agentclientprotocol/sdk";

/** Every src module reachable from `entry` (relative imports, static and dynamic), and the packages each imports. */
function closure(entry: string): Map<string, string[]> {
  const seen = new Map<string, string[]>();
  const todo = [entry];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    const text = readFileSync(f, "utf8");
    const packages: string[] = [];
    seen.set(f, packages);
    for (const m of text.matchAll(/(?:import|export)\s[^'"]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
      const spec = (m[1] ?? m[2])!;
      if (!spec.startsWith(".")) {
        packages.push(spec);
        continue;
      }
      const ts = resolve(dirname(f), spec).replace(/\.js$/, ".ts");
      if (existsSync(ts)) todo.push(ts);
    }
  }
  return seen;
}

it("no other command reaches the ACP SDK; berth acp does", () => {
  const cli = join(REPO_ROOT, "src", "cli");
  for (const entry of ["service.ts", "daemon.ts", join("chat", "index.ts")]) {
    const reached = [...closure(join(cli, entry))].filter(([, pkgs]) => pkgs.some((p) => p.startsWith(SDK))).map(([f]) => relative(REPO_ROOT, f));
    assert.deepEqual(reached, [], `${entry} reaches the ACP SDK`);
  }
  const acp = [...closure(join(cli, "acp.ts"))].filter(([, pkgs]) => pkgs.some((p) => p.startsWith(SDK)));
  assert.ok(acp.length > 0, "the walk finds the SDK from berth acp (so it can find it elsewhere)");
  const main = readFileSync(join(cli, "main.ts"), "utf8");
  assert.match(main, /case "acp": \{\s*const m = await import\("\.\/acp\.js"\)/, "main loads acp.ts lazily");
  assert.doesNotMatch(main, /^import .*acp/m);
});
