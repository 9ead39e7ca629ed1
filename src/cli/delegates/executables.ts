/**
 * Finding the delegate CLIs (`codex`, `claude`, `pi`) on PATH without stat-ing every PATH entry for every CLI on
 * every turn.
 *
 * Contract (what a user may rely on):
 * - The answer is what a fresh PATH scan would give: the first absolute PATH directory holding a regular,
 *   executable file of that name (relative and empty entries are skipped).
 * - Answers are reused without any check for `REUSE_MS` (2 s) after the last check while PATH is the same value, so
 *   turns in quick succession cost no file system call here. A changed PATH value is checked at once.
 * - Installing or removing a CLI in a PATH directory shows at the first lookup at least `REUSE_MS` after the last
 *   check (the next turn's tools, at most 2 s later than a fresh scan would): the cache is keyed by the PATH value and
 *   by each directory's modification time, which an added, removed or renamed entry changes. Answers are not reused
 *   when a directory had changed less than 2 s before they were cached (a second change in the same timestamp tick
 *   would leave the mtime as it was): such a directory is re-scanned until then.
 * - Not seen without a re-scan: a file made executable (or not) in place with chmod, or rewritten in place.
 * - Cost per check with nothing changed: one stat per PATH directory for all names together.
 */
import { statSync, type Stats } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";

const RACY_MS = 2000;
/** How long answers are reused without a check while PATH is unchanged (see the module contract). */
export const REUSE_MS = 2000;

export interface ExecutableResolverOptions {
  /**
   * `fs.statSync` (a seam for tests that count file system calls); a missing path throws or returns undefined. The
   * default returns undefined: most PATH entries hold none of the names, and an ENOENT exception per entry and name
   * (~40 on a session's first tools) costs a session process's first turn ~0.3 ms and ~70 KB of garbage.
   */
  stat?: (path: string) => Stats | undefined;
  now?: () => number;
}

export class ExecutableResolver {
  private pathValue: string | undefined;
  private dirs: Array<{ dir: string; mtimeMs: number | null }> | null = null;
  private readonly found = new Map<string, string | null>();
  private checkedAt = 0;
  private readonly stat: (path: string) => Stats | undefined;
  private readonly now: () => number;

  constructor(o: ExecutableResolverOptions = {}) {
    this.stat = o.stat ?? ((p) => statSync(p, { throwIfNoEntry: false }));
    this.now = o.now ?? Date.now;
  }

  /** The path of each executable of `names` on `path` (a PATH value), or null; one validation for all of them. */
  resolve(names: readonly string[], path: string | undefined): Array<string | null> {
    this.validate(path);
    return names.map((name) => {
      const cached = this.found.get(name);
      if (cached !== undefined) return cached;
      const r = scan(name, this.dirs!.map((d) => d.dir), this.stat);
      this.found.set(name, r);
      return r;
    });
  }

  /**
   * Drops cached answers unless PATH and every directory on it are unchanged (and none is racy); within `REUSE_MS`
   * of the last check of the same PATH value, checks nothing.
   */
  private validate(path: string | undefined): void {
    const now = this.now();
    if (this.dirs !== null && this.pathValue === path && now - this.checkedAt < REUSE_MS && now >= this.checkedAt) return;
    const dirs = (path ?? "").split(delimiter).filter((d) => d !== "" && isAbsolute(d));
    const current = dirs.map((dir) => {
      let mtimeMs: number | null;
      try {
        mtimeMs = this.stat(dir)?.mtimeMs ?? null;
      } catch {
        mtimeMs = null;
      }
      return { dir, mtimeMs };
    });
    // Answers cached at the previous check hold if no directory changed since, and none had changed within
    // RACY_MS before that check (a change in the same timestamp tick leaves the mtime as it was).
    const prev = this.checkedAt;
    const same =
      this.dirs !== null &&
      this.pathValue === path &&
      this.dirs.length === current.length &&
      current.every((c, i) => c.dir === this.dirs![i]!.dir && c.mtimeMs === this.dirs![i]!.mtimeMs && (c.mtimeMs === null || prev - c.mtimeMs >= RACY_MS));
    if (!same) this.found.clear();
    this.pathValue = path;
    this.dirs = current;
    this.checkedAt = now;
  }
}

function scan(name: string, dirs: string[], stat: (p: string) => Stats | undefined): string | null {
  for (const dir of dirs) {
    const p = join(dir, name);
    try {
      const st = stat(p);
      if (st !== undefined && st.isFile() && (st.mode & 0o111) !== 0) return p;
    } catch {
      // not here
    }
  }
  return null;
}
