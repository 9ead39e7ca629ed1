/**
 * Atomic, durable file replacement (settings, auth, catalog cache, the host's Berth registry).
 * Contract of `writeFileAtomic(path, data, mode)`:
 * - the data goes to a temp file beside `path` named `<name>.<digits>` (created exclusively, `mode` set explicitly
 *   whatever the umask), is fsynced, then renamed over `path`, and the directory is fsynced: once the promise
 *   resolves the new content survives a crash or power loss; before that, readers see the old file or the new one,
 *   never a partial one;
 * - on failure the temp file is removed and the error (an fs error) is rethrown; `path` is untouched;
 * - a writer killed mid-write can leave a `<name>.<digits>` temp file: callers that serialize writers under a lock
 *   remove such debris under that lock (settings/locked-json.ts).
 * Concurrent writers of one path must be serialized by the caller (a lock, or a promise chain); the last rename wins.
 */
import { constants } from "node:fs";
import { open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";

let seq = 0;

/** `<path>.<digits>`: unique within this process (pid + counter), digits only so debris is recognisable. */
export function tempPathFor(path: string): string {
  seq = (seq + 1) % 1_000_000;
  return `${path}.${process.pid}${String(seq).padStart(6, "0")}${Math.floor(Math.random() * 1000).toString().padStart(3, "0")}`;
}

/** True for the temp-file names `writeFileAtomic` (and the write-file-atomic library before it) leaves beside `name`. */
export function isTempName(name: string, fileName: string): boolean {
  return name.startsWith(`${fileName}.`) && /^\d+$/.test(name.slice(fileName.length + 1));
}

async function fsyncDir(dir: string): Promise<void> {
  const fd = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fd.sync();
  } finally {
    await fd.close();
  }
}

export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const tmp = tempPathFor(path);
  let renamed = false;
  try {
    const fd = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
    try {
      await fd.chmod(mode);
      await fd.writeFile(data);
      await fd.sync();
    } finally {
      await fd.close();
    }
    await rename(tmp, path);
    renamed = true;
    await fsyncDir(dirname(path));
  } catch (err) {
    if (!renamed) await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}
