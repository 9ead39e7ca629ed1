/**
 * Read-only access to the built web UI (`dist/ui/`): the page and its hashed assets.
 * Contract: `name` is `index.html` or `assets/<file>` as validated by the caller (no separators
 * beyond that one, no leading dot); a missing file is `null`, never an exception. Nothing is
 * written, cached across builds or resolved outside `dir`.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** `dist/ui/` next to the compiled `dist/src/` tree. */
export const DEFAULT_UI_DIR = fileURLToPath(new URL("../../ui/", import.meta.url));

export async function readUiFile(dir: string, name: string): Promise<Buffer | null> {
  try {
    return await readFile(join(dir, name));
  } catch {
    return null;
  }
}
