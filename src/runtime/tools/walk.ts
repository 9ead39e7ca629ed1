/**
 * Bounded, sorted, synchronous directory walk for the search worker (never the main thread).
 * Skips `.git` and `node_modules` at any depth, does not follow symlinked directories, and stops
 * after `maxEntries` visited entries (reported through `truncated`).
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";

export const SKIPPED_DIRS: ReadonlySet<string> = new Set([".git", "node_modules"]);

export interface WalkState {
  visited: number;
  truncated: boolean;
  /** Directories that could not be read (permission, vanished). */
  unreadable: number;
}

/**
 * Yields regular files (and symlinks, which are not followed as directories) as `/`-separated
 * paths relative to `root`: a directory's files sorted by name, then its subdirectories in turn.
 */
export function* walkFiles(root: string, maxEntries: number, state: WalkState): Generator<{ rel: string; abs: string }> {
  const stack: string[] = [""];
  while (stack.length > 0) {
    const relDir = stack.pop() as string;
    let entries;
    try {
      entries = readdirSync(relDir === "" ? root : join(root, relDir), { withFileTypes: true });
    } catch {
      state.unreadable++;
      continue;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const e of entries) {
      if (++state.visited > maxEntries) {
        state.truncated = true;
        return;
      }
      const rel = relDir === "" ? e.name : `${relDir}/${e.name}`;
      if (e.isDirectory()) {
        if (!SKIPPED_DIRS.has(e.name)) subdirs.push(rel);
      } else if (e.isFile() || e.isSymbolicLink()) {
        yield { rel, abs: join(root, rel) };
      }
    }
    // Pushed in reverse so the walk is depth-first in sorted order.
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i] as string);
  }
}
