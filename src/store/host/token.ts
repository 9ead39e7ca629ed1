/**
 * The host's bearer token: `<stateDir>/token`, owner-only (0600), at least 32 characters.
 * Contract: the file is never followed through a symbolic link (a symlinked or non-regular
 * token file is refused with an error saying how to fix it, and nothing it points at is read
 * or chmodded); an existing token of that length is kept (its mode is re-tightened through the
 * opened descriptor); otherwise a fresh random one is written and returned.
 */
import { closeSync, constants, fchmodSync, fstatSync, lstatSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";

export function loadToken(dir: string): string {
  const p = join(dir, "token");
  let st;
  try {
    st = lstatSync(p);
  } catch {
    st = undefined;
  }
  if (st && !st.isFile())
    throw new Error(`${p} is ${st.isSymbolicLink() ? "a symbolic link" : "not a regular file"}; refusing to use it as the host token (remove it; a new token is written at the next start)`);
  if (st) {
    const fd = openSync(p, constants.O_RDWR | constants.O_NOFOLLOW);
    try {
      if (!fstatSync(fd).isFile()) throw new Error(`${p} is not a regular file; refusing to use it as the host token`);
      fchmodSync(fd, 0o600);
      const t = readFileSync(fd, "utf8").trim();
      if (t.length >= 32) return t;
    } finally {
      closeSync(fd);
    }
  }
  const t = randomBytes(32).toString("base64url");
  const fd = openSync(p, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, t + "\n");
  } finally {
    closeSync(fd);
  }
  return t;
}
