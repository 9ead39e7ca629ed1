/**
 * `npm run bench`: runs every `dist/bench/**\/*.bench.js` module and prints one JSON object per figure.
 * A bench module default-exports `async () => Figure[]`. Filter with substrings as arguments.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export interface Figure {
  /** Stable figure name, e.g. "service.spawn_to_initialize_ms.median". */
  name: string;
  value: number;
  unit: string;
  /** The target from the issue, e.g. "<= 100". */
  target?: string;
  ok?: boolean;
  [extra: string]: unknown;
}

const here = fileURLToPath(new URL(".", import.meta.url));
const filters = process.argv.slice(2);
const files: string[] = [];
(function walk(dir: string) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith(".bench.js")) files.push(p);
  }
})(here);

// The benches' state roots and workspaces go under one directory of this run (children inherit TMPDIR), removed at
// the end.
const scratch = mkdtempSync(join(tmpdir(), "berth-bench-"));
process.env["TMPDIR"] = scratch;
let failed = false;
for (const f of files) {
  const rel = relative(here, f);
  if (filters.length > 0 && !filters.some((s) => rel.includes(s))) continue;
  try {
    const mod = (await import(pathToFileURL(f).href)) as { default: () => Promise<Figure[]> };
    for (const fig of await mod.default()) process.stdout.write(JSON.stringify({ bench: rel, ...fig }) + "\n");
  } catch (err) {
    failed = true;
    process.stdout.write(JSON.stringify({ bench: rel, error: err instanceof Error ? err.message : String(err) }) + "\n");
  }
}
rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
process.exitCode = failed ? 1 : 0;
