/** The package version, read once from package.json (no other imports: cheap for `--version`). */
import { readFileSync } from "node:fs";

let cached: string | null = null;

export function berthVersion(): string {
  cached ??= (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;
  return cached;
}
