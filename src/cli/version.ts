/** The package version, read once from package.json (no other imports: cheap for `--version`). */
import { readFileSync } from "node:fs";
import { join } from "node:path";

let cached: string | null = null;

export function berthVersion(): string {
  // A path, not a file: URL: a fresh process's first URL parse and fileURLToPath cost ~0.3 ms before its handshake.
  cached ??= (JSON.parse(readFileSync(join(import.meta.dirname, "../../../package.json"), "utf8")) as { version: string }).version;
  return cached;
}
