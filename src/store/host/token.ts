/**
 * The host's bearer token: `<stateDir>/token`, owner-only (0600), at least 32 characters. Contract: an existing
 * token of that length is kept (its mode is re-tightened); otherwise a fresh random one is written and returned.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";

export function loadToken(dir: string): string {
  const p = join(dir, "token");
  if (existsSync(p)) {
    chmodSync(p, 0o600);
    const t = readFileSync(p, "utf8").trim();
    if (t.length >= 32) return t;
  }
  const t = randomBytes(32).toString("base64url");
  writeFileSync(p, t + "\n", { mode: 0o600, flag: "w" });
  chmodSync(p, 0o600);
  return t;
}
