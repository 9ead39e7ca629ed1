/**
 * Bounded, sorted, synchronous directory walk for the search worker (never the main thread).
 * Skips `.git` and `node_modules` at any depth, does not follow symlinked directories, and stops
 * after `maxEntries` visited entries (reported through `truncated` and `stoppedIn`). Each directory
 * is read entry by entry (`opendirSync`), never whole, so one directory holding millions of entries
 * costs no more memory than `maxEntries` names.
 */
import { opendirSync, statSync, type Dir, type Dirent } from "node:fs";
import { join } from "node:path";

export const SKIPPED_DIRS: ReadonlySet<string> = new Set([".git", "node_modules"]);
/** Names of symlinked directories kept for a note (the count goes on past it). */
const MAX_NAMED_LINKS = 3;

export interface WalkState {
  visited: number;
  truncated: boolean;
  /** When `truncated`: the directory (relative, "" for the root) whose reading was stopped. */
  stoppedIn?: string;
  /** Directories that could not be read (permission, vanished). */
  unreadable: number;
  /** Symlinks to directories met (not descended), and the first few of their paths. */
  linkedDirs: number;
  linkedDirNames: string[];
}

export function newWalkState(): WalkState {
  return { visited: 0, truncated: false, unreadable: 0, linkedDirs: 0, linkedDirNames: [] };
}

/**
 * `file`: a regular file, or a symlink leading to one. `broken`: a symlink that leads nowhere (dangling, looping,
 * or to something that is neither a file nor a directory), never read.
 */
export type WalkEntry = { rel: string; abs: string; kind: "file" | "broken" };

/** What a symlink leads to; `stat` follows it, and a loop ends at once with ELOOP. */
function linkTarget(abs: string): "file" | "dir" | "broken" {
  try {
    const st = statSync(abs);
    return st.isFile() ? "file" : st.isDirectory() ? "dir" : "broken";
  } catch {
    return "broken";
  }
}

/**
 * Yields regular files and symlinks (classified, never followed as directories) as `/`-separated
 * paths relative to `root`: a directory's entries sorted by name, then its subdirectories in turn.
 * A symlinked directory is counted in `state` when `linkCounts` (default: every one) says a result could have been
 * under it.
 */
export function* walkFiles(root: string, maxEntries: number, state: WalkState, linkCounts?: (rel: string) => boolean): Generator<WalkEntry> {
  const stack: string[] = [""];
  while (stack.length > 0) {
    const relDir = stack.pop() as string;
    const entries: Dirent[] = [];
    let dir: Dir;
    try {
      dir = opendirSync(relDir === "" ? root : join(root, relDir));
    } catch {
      state.unreadable++;
      continue;
    }
    try {
      for (let e = dir.readSync(); e !== null; e = dir.readSync()) {
        if (++state.visited > maxEntries) {
          state.truncated = true;
          state.stoppedIn = relDir;
          break;
        }
        entries.push(e);
      }
    } catch {
      state.unreadable++;
    } finally {
      dir.closeSync();
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const subdirs: string[] = [];
    for (const e of entries) {
      const rel = relDir === "" ? e.name : `${relDir}/${e.name}`;
      if (e.isDirectory()) {
        if (!SKIPPED_DIRS.has(e.name)) subdirs.push(rel);
      } else if (e.isFile()) {
        yield { rel, abs: join(root, rel), kind: "file" };
      } else if (e.isSymbolicLink()) {
        const abs = join(root, rel);
        const kind = linkTarget(abs);
        if (kind !== "dir") yield { rel, abs, kind };
        else if (!SKIPPED_DIRS.has(e.name) && (linkCounts === undefined || linkCounts(rel)) && state.linkedDirs++ < MAX_NAMED_LINKS) state.linkedDirNames.push(rel);
      }
    }
    if (state.truncated) return;
    // Pushed in reverse so the walk is depth-first in sorted order.
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i] as string);
  }
}
