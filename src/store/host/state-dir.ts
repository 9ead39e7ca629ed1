/**
 * The host's state directory on disk: created owner-only, and its SQLite files kept owner-only.
 * (The door in `protocols/host` never touches files itself; the composition calls these.)
 */
import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";

/** Creates `dir` (and parents) if needed and makes it owner-only (0700), also when it already existed. */
export function ensureOwnerDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** Makes the store's database files that exist owner-only (0600). */
export function restrictStoreFiles(stateDir: string): void {
  for (const f of ["host.db", "host.db-wal", "host.db-shm"]) if (existsSync(join(stateDir, f))) chmodSync(join(stateDir, f), 0o600);
}
