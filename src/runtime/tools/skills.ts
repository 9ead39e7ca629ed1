/**
 * Skills: directories holding a `SKILL.md` whose front matter names the skill (`name:`) and says when to use it
 * (`description:`). Contracts:
 * - Roots, in precedence order (the first skill of a name wins, so a repository cannot shadow a user's skill):
 *   `$MC_HOME/skills`, `~/.agents/skills`, `~/.claude/skills`, then the session workspace's `.agents/skills` and
 *   `.claude/skills`. A missing or unreadable root contributes nothing (never an error).
 * - Bounds: at most `MAX_SKILL_DIRS_PER_ROOT` directory entries examined per root, `MAX_SKILLS` skills in all,
 *   front matter read from the first `MAX_FRONT_MATTER_BYTES` bytes, names 1..64 of `[A-Za-z0-9._-]`,
 *   descriptions cut to `MAX_DESCRIPTION_CHARS`.
 * - Containment: a skill's `SKILL.md`, symlinks resolved, must lie inside its root (symlinks resolved); one that
 *   escapes is skipped at discovery and refused again by `readSkill` (the check is repeated on every read).
 * - Only regular files: a `SKILL.md` that is a FIFO, socket or device is skipped (opened non-blocking, as the file
 *   tools open, so it never blocks).
 * - Caching: one result per root per process, revalidated on every call by `stat`ing the root and the examined
 *   skill directories and files (mtime, size, inode); any change rescans that root only.
 */
import { readdir as fsReaddir, stat as fsStat, statSync } from "node:fs";
import { realpath } from "node:fs/promises";
import { join, sep } from "node:path";
import { truncateUtf8 } from "../../core/utf8.js";
import { openRegular } from "./confine.js";

export const MAX_SKILLS = 64;
export const MAX_SKILL_DIRS_PER_ROOT = 128;
export const MAX_FRONT_MATTER_BYTES = 8 * 1024;
export const MAX_DESCRIPTION_CHARS = 1024;
/** Largest SKILL.md text `read_skill` returns (UTF-8 bytes, cut at a character boundary with a note). */
export const MAX_SKILL_FILE_BYTES = 32 * 1024;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface Skill {
  name: string;
  description: string;
  /** The skill directory (as found under its root). */
  dir: string;
  /** The root it was found in (as configured, not resolved). */
  root: string;
}

export interface SkillRootsOptions {
  /** Resolved MC_HOME. */
  mcHome: string;
  /** The user's home directory (`~`). */
  userHome: string;
}

/** The roots for one session workspace, in precedence order. */
export function skillRoots(o: SkillRootsOptions, cwd: string): string[] {
  return [
    join(o.mcHome, "skills"),
    join(o.userHome, ".agents", "skills"),
    join(o.userHome, ".claude", "skills"),
    join(cwd, ".agents", "skills"),
    join(cwd, ".claude", "skills"),
  ];
}

/** Parses `name` / `description` from leading `---` front matter; null when absent or malformed. */
export function parseFrontMatter(text: string): { name: string; description: string } | null {
  const t = text.startsWith("\uFEFF") ? text.slice(1) : text;
  const lines = t.split(/\r?\n/);
  if (lines[0]?.trim() !== "---") return null;
  const fields = new Map<string, string>();
  let i = 1;
  for (; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (line.trim() === "---") break;
    const m = /^([A-Za-z_][A-Za-z0-9_-]*):\s*(.*)$/.exec(line);
    if (m === null) continue;
    const key = m[1] as string;
    let value = (m[2] ?? "").trim();
    if (value === ">" || value === "|" || value === ">-" || value === "|-" || value === "") {
      // A block scalar: the following indented lines.
      const parts: string[] = [];
      while (i + 1 < lines.length && /^\s+\S/.test(lines[i + 1] ?? "")) parts.push((lines[++i] ?? "").trim());
      value = parts.join(value.startsWith("|") ? "\n" : " ");
    } else if ((value.startsWith('"') && value.endsWith('"') && value.length >= 2) || (value.startsWith("'") && value.endsWith("'") && value.length >= 2)) {
      value = value.slice(1, -1);
    }
    if (!fields.has(key)) fields.set(key, value);
  }
  if (i >= lines.length) return null; // no closing ---
  const name = fields.get("name")?.trim() ?? "";
  const description = (fields.get("description") ?? "").replace(/\s+/g, " ").trim();
  if (!NAME_RE.test(name) || description === "") return null;
  return { name, description: description.length > MAX_DESCRIPTION_CHARS ? `${description.slice(0, MAX_DESCRIPTION_CHARS - 1)}…` : description };
}

/**
 * The first `max` bytes of a regular file, or null. Opened like the file tools open (confine.ts `openRegular`):
 * FIFOs, sockets and devices are refused before and after a non-blocking open, so a SKILL.md that is not a regular
 * file can never park a thread-pool thread.
 */
async function readHead(path: string, max: number): Promise<{ text: string; size: number } | null> {
  const opened = await openRegular("read_skill", path, path);
  if (!opened.ok) return null;
  const fh = opened.handle;
  try {
    const buf = Buffer.alloc(Math.min(opened.size, max));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return { text: buf.subarray(0, bytesRead).toString("utf8"), size: opened.size };
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** True when `path` (symlinks resolved) is `root` (resolved) or inside it. */
async function contained(root: string, path: string): Promise<string | null> {
  try {
    const [r, p] = await Promise.all([realpath(root), realpath(path)]);
    return p.startsWith(r.endsWith(sep) ? r : r + sep) ? p : null;
  } catch {
    return null;
  }
}

const stampOf = (s: { mtimeMs: number; size: number; ino: number } | null): string => (s === null ? "-" : `${s.mtimeMs}:${s.size}:${s.ino}`);
// The scan's stat and readdir use node:fs's callbacks (same calls, same errors): a first turn with no skills then loads
// no node:fs/promises (the code-cached script requires it on first use only; issue 19).
const statOrNull = (p: string): Promise<{ mtimeMs: number; size: number; ino: number } | null> => new Promise((resolve) => fsStat(p, (err, st) => resolve(err !== null ? null : st)));
const readdirNames = (p: string): Promise<string[]> => new Promise((resolve, reject) => fsReaddir(p, (err, names) => (err !== null ? reject(err) : resolve(names))));

interface RootScan {
  /** Paths whose stamps, unchanged, prove the scan still holds. */
  watched: Array<[string, string]>;
  skills: Skill[];
}

/**
 * The root's own stamp, synchronously (a metadata call, as `stillValid` makes on every turn): a missing root — the
 * usual case, several per session — then costs no thread-pool round trip at all, which on a fresh process's first
 * turn each waited for a turn of a busy event loop (issue 19). `undefined`: another error (the async scan goes on,
 * as before, and its readdir decides).
 */
function rootStat(root: string): { mtimeMs: number; size: number; ino: number } | null | undefined {
  try {
    return statSync(root, { throwIfNoEntry: false }) ?? null;
  } catch {
    return undefined;
  }
}

async function scanRoot(root: string): Promise<RootScan> {
  const st = rootStat(root);
  // Missing: nothing to list (a root created later changes its stamp, so the next revalidation rescans it).
  if (st === null) return { watched: [[root, stampOf(null)]], skills: [] };
  const watched: Array<[string, string]> = [[root, stampOf(st ?? null)]];
  const skills: Skill[] = [];
  let names: string[];
  try {
    names = (await readdirNames(root)).filter((n) => !n.startsWith(".")).sort().slice(0, MAX_SKILL_DIRS_PER_ROOT);
  } catch {
    return { watched, skills };
  }
  await Promise.all(
    names.map(async (n) => {
      const dir = join(root, n);
      const file = join(dir, "SKILL.md");
      const [ds, fs] = await Promise.all([statOrNull(dir), statOrNull(file)]);
      watched.push([dir, stampOf(ds)], [file, stampOf(fs)]);
      if (fs === null) return;
      const real = await contained(root, file);
      if (real === null) return;
      const head = await readHead(real, MAX_FRONT_MATTER_BYTES);
      const fm = head === null ? null : parseFrontMatter(head.text);
      if (fm !== null) skills.push({ ...fm, dir, root });
    }),
  );
  skills.sort((a, b) => (a.dir < b.dir ? -1 : 1));
  return { watched, skills };
}

/**
 * Revalidation runs on every turn: synchronous `stat`s (metadata only, microseconds each, and mostly of missing
 * roots) instead of a thread-pool round trip per path.
 */
function stillValid(scan: RootScan): boolean {
  return scan.watched.every(([p, stamp]) => {
    let st;
    try {
      st = statSync(p, { throwIfNoEntry: false }) ?? null;
    } catch {
      st = null;
    }
    return stampOf(st) === stamp;
  });
}

/** Per-process skill discovery with cheap revalidation (see module contract). */
export class SkillCatalog {
  private readonly cache = new Map<string, Promise<RootScan>>();

  constructor(private readonly o: SkillRootsOptions) {}

  private async root(root: string): Promise<RootScan> {
    const cached = this.cache.get(root);
    if (cached !== undefined) {
      const scan = await cached;
      if (stillValid(scan)) return scan;
    }
    const fresh = scanRoot(root);
    this.cache.set(root, fresh);
    return fresh;
  }

  /** Skills visible to a session working in `cwd`, deduplicated by name (first root wins), at most MAX_SKILLS. */
  async discover(cwd: string): Promise<Skill[]> {
    const scans = await Promise.all(skillRoots(this.o, cwd).map((r) => this.root(r)));
    const byName = new Map<string, Skill>();
    for (const s of scans.flatMap((x) => x.skills)) {
      if (byName.size >= MAX_SKILLS) break;
      if (!byName.has(s.name)) byName.set(s.name, s);
    }
    return [...byName.values()];
  }

  /**
   * The bounded SKILL.md of a discovered skill. Only a discovered name is accepted; containment under its root is
   * checked again at read time (a symlink swapped in after discovery is refused).
   */
  async read(cwd: string, name: string): Promise<{ ok: true; skill: Skill; text: string } | { ok: false; message: string }> {
    const skills = await this.discover(cwd);
    const skill = skills.find((s) => s.name === name);
    if (skill === undefined) {
      const known = skills.map((s) => s.name).join(", ");
      return { ok: false, message: `unknown skill "${name.slice(0, 64)}"; available: ${known === "" ? "(none)" : known}` };
    }
    const real = await contained(skill.root, join(skill.dir, "SKILL.md"));
    if (real === null) return { ok: false, message: `skill "${name}" is no longer inside its skills directory` };
    const head = await readHead(real, MAX_SKILL_FILE_BYTES + 4);
    if (head === null) return { ok: false, message: `skill "${name}" could not be read` };
    const text = head.size > MAX_SKILL_FILE_BYTES ? `${truncateUtf8(head.text, MAX_SKILL_FILE_BYTES)}\n[… SKILL.md truncated at ${MAX_SKILL_FILE_BYTES} bytes …]` : head.text;
    return { ok: true, skill, text };
  }
}
