/**
 * The file-access policy of the built-in file tools (read, write, edit, ls, grep, glob) and the safe way they open
 * files. Contracts:
 * - A tool path is resolved (relative to `ctx.cwd`, `~/` expanded), then canonicalised with `realpath` (for a path
 *   that does not exist yet: the nearest existing ancestor's realpath plus the remaining names), so `../`, absolute
 *   paths and symlinks are judged by where they really lead.
 * - `confine: true` (the default when a session passes no policy): the canonical path must lie inside the session's
 *   workspace (`ctx.cwd`) or one of `extraRoots`; secrets directories of the home (`~/.ssh`, `~/.gnupg`, `~/.aws`)
 *   are refused even inside an allowed root.
 * - `protectedRoots` (Berth's state root): never writable by a tool, whatever `confine` says; unreadable too while
 *   confined (it holds credentials).
 * - Only regular files are opened for content: FIFOs, sockets and devices are refused by `lstat` before any open,
 *   and every open uses O_NONBLOCK followed by `fstat` (a swap after the check still cannot block a thread-pool
 *   thread), so no tool call can park a libuv thread.
 * Refusals come back as `denied` tool results whose text names the path the model gave and the rule it broke.
 */
import { constants as FS, realpathSync } from "node:fs";
import { lstat, open, realpath, rename, unlink, type FileHandle } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, join, sep } from "node:path";
import type { ToolContext, ToolResult } from "../types.js";
import { removeDeadTemps, tempName } from "./atomic-temp.js";
import { resolvePath } from "./paths.js";
import { fail, fsFail } from "./result.js";

export interface FileAccessPolicy {
  /** Confine paths to the workspace (`ctx.cwd`) plus `extraRoots`. */
  confine: boolean;
  /** Further directories file tools may use while confined (absolute). */
  extraRoots: readonly string[];
  /** Directories no tool may write (and, while confined, read): Berth's own state root. */
  protectedRoots: readonly string[];
}

/** How `bash` runs: directly, or inside a bubblewrap sandbox (see sandbox.ts). */
export type SandboxMode = "none" | "bubblewrap";

/** What a session runtime hands its tools: chosen per door (a door with approvals may loosen it). */
export interface ToolPolicy {
  files: FileAccessPolicy;
  sandbox: SandboxMode;
}

/** The safe default for doors without an approval channel. */
export const DEFAULT_TOOL_POLICY: ToolPolicy = { files: { confine: true, extraRoots: [], protectedRoots: [] }, sandbox: "none" };

/** Home directories whose contents are secrets; refused while confined even when inside an allowed root. */
export const SECRET_HOME_DIRS = [".ssh", ".gnupg", ".aws"] as const;

/** The policy in force for a call: the context's, else the safe default. */
export function policyOf(ctx: ToolContext): ToolPolicy {
  return (ctx as ToolContext & { policy?: ToolPolicy }).policy ?? DEFAULT_TOOL_POLICY;
}

/** `child` equals `root` or lies below it (both canonical). */
export function isWithin(child: string, root: string): boolean {
  if (child === root) return true;
  return child.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** realpath of `p`, or of its nearest existing ancestor with the missing tail appended. */
export async function canonical(p: string): Promise<string> {
  const tail: string[] = [];
  let cur = p;
  for (;;) {
    try {
      const real = await realpath(cur);
      return tail.length === 0 ? real : join(real, ...tail.reverse());
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
      const parent = dirname(cur);
      if (parent === cur) return p;
      tail.push(basename(cur));
      cur = parent;
    }
  }
}

function canonicalSync(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

export type Access = "read" | "write";

export type Resolved = { ok: true; path: string } | { ok: false; result: ToolResult };

/** Allowed and denied canonical roots for a call (computed per call: cheap realpaths of a few directories). */
export async function rootsFor(ctx: ToolContext): Promise<{ allowed: string[]; secret: string[]; protectedRoots: string[]; confine: boolean }> {
  const p = policyOf(ctx).files;
  const home = homedir();
  const allowed = p.confine ? await Promise.all([ctx.cwd, ...p.extraRoots].map((r) => canonical(r))) : [];
  return {
    allowed,
    secret: p.confine ? SECRET_HOME_DIRS.map((d) => canonicalSync(join(home, d))) : [],
    protectedRoots: await Promise.all(p.protectedRoots.map((r) => canonical(r))),
    confine: p.confine,
  };
}

/**
 * Resolves the model's `given` path for `access` under the call's policy. The returned path is canonical; open it
 * (not `given`) so the decision and the open agree.
 */
export async function resolveForTool(tool: string, ctx: ToolContext, given: string, access: Access): Promise<Resolved> {
  let abs: string;
  try {
    abs = await canonical(resolvePath(ctx.cwd, given));
  } catch (err) {
    return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
  const verdict = judge(abs, access, await rootsFor(ctx));
  if (verdict !== null) return { ok: false, result: fail("denied", `${tool}: ${given}: ${verdict}`) };
  return { ok: true, path: abs };
}

/** null when `abs` (canonical) is allowed for `access`, else the reason. */
export function judge(abs: string, access: Access, r: { allowed: string[]; secret: string[]; protectedRoots: string[]; confine: boolean }): string | null {
  for (const root of r.protectedRoots) {
    if (!isWithin(abs, root)) continue;
    if (access === "write") return "Berth's state directory is never writable by tools";
    if (r.confine) return "Berth's state directory is not readable by tools";
  }
  if (!r.confine) return null;
  for (const s of r.secret) if (isWithin(abs, s)) return "secrets directories of the home (~/.ssh, ~/.gnupg, ~/.aws) are not accessible to tools";
  if (r.allowed.some((root) => isWithin(abs, root))) return null;
  return "outside the session's workspace; file tools may only use the workspace and the directories listed in settings (tools.allowed_dirs)";
}

function notRegular(tool: string, given: string, st: Parameters<typeof kindOf>[0]): ToolResult {
  if (st.isDirectory()) return fail("failed", `${tool}: ${given} is a directory (use ls)`);
  return fail("failed", `${tool}: ${given} is ${kindOf(st)}; only regular files can be used`);
}

/** Names the kind of a non-regular file for an error message. */
function kindOf(st: { isFIFO(): boolean; isSocket(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isDirectory(): boolean }): string {
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  if (st.isDirectory()) return "a directory";
  return "not a regular file";
}

export type Opened = { ok: true; handle: FileHandle; size: number } | { ok: false; result: ToolResult };

/**
 * Opens an existing regular file for reading (or read-write with `forWrite`) without ever blocking: `lstat` refuses
 * non-regular files before the open, O_NONBLOCK + `fstat` refuse one swapped in meanwhile.
 */
export async function openRegular(tool: string, given: string, path: string, forWrite = false): Promise<Opened> {
  try {
    const st = await lstat(path);
    if (!st.isFile()) return { ok: false, result: notRegular(tool, given, st) };
  } catch (err) {
    return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
  let handle: FileHandle;
  try {
    handle = await open(path, (forWrite ? FS.O_RDWR : FS.O_RDONLY) | FS.O_NONBLOCK | FS.O_NOFOLLOW);
  } catch (err) {
    return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) {
      await handle.close();
      return { ok: false, result: notRegular(tool, given, st) };
    }
    return { ok: true, handle, size: st.size };
  } catch (err) {
    await handle.close().catch(() => undefined);
    return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
}

/**
 * Opens `path` for replacing its content: an existing entry must be a regular file (refused otherwise before any
 * open); a missing one is created (mode 0666 & ~umask). Never follows a final symlink, never blocks.
 */
export async function openForWrite(tool: string, given: string, path: string): Promise<Opened> {
  try {
    const st = await lstat(path);
    if (!st.isFile()) return { ok: false, result: notRegular(tool, given, st) };
    return await openRegular(tool, given, path, true);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
  try {
    const handle = await open(path, FS.O_RDWR | FS.O_CREAT | FS.O_EXCL | FS.O_NONBLOCK | FS.O_NOFOLLOW, 0o666);
    return { ok: true, handle, size: 0 };
  } catch (err) {
    return { ok: false, result: fsFail(err, `${tool}: ${given}`) };
  }
}

/** Writes all of `buf` to `handle` from offset 0. */
async function writeAll(handle: FileHandle, buf: Buffer): Promise<void> {
  for (let off = 0; off < buf.length; ) {
    const { bytesWritten } = await handle.write(buf, off, buf.length - off, off);
    off += bytesWritten;
  }
}

/**
 * Replaces the whole content of the opened regular file at `path` (canonical, as `resolveForTool` returned it) with
 * `text`, atomically: the text goes to a new file in the same directory (atomic-temp.ts `tempName`:
 * `.<name>.w1-<pid>-<start>-<tag>-<random>.berth-tmp`, created exclusively, never through a symlink; leftovers of
 * killed writers of the same name are removed first, `removeDeadTemps`), is flushed to disk and given the file's owner (when the process may set it)
 * and permission bits (setuid/setgid dropped), then renamed over `path`. A crash or a failed write (disk full, quota, file size
 * limit) leaves the old content whole; a reader sees the old text or the new, never a truncated mix. The name then
 * holds a new file: other hard links to the old one keep the old content. A directory that refuses a new file
 * (EACCES/EPERM: a writable file in a read-only directory) gets the old behaviour, the file rewritten in place
 * through `handle`.
 */
export async function replaceContent(handle: FileHandle, path: string, text: string): Promise<void> {
  const buf = Buffer.from(text, "utf8");
  const st = await handle.stat();
  // A Berth killed between the create and the rename left its temporary file here: removed once its writer is gone.
  await removeDeadTemps(dirname(path), basename(path));
  const tmp = join(dirname(path), tempName(basename(path)));
  let out: FileHandle;
  try {
    out = await open(tmp, FS.O_WRONLY | FS.O_CREAT | FS.O_EXCL | FS.O_NOFOLLOW | FS.O_NONBLOCK, 0o600);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EACCES" && code !== "EPERM") throw err;
    await handle.truncate(0);
    await writeAll(handle, buf);
    return;
  }
  try {
    await writeAll(out, buf);
    if (st.uid !== process.getuid?.() || st.gid !== process.getgid?.()) await out.chown(st.uid, st.gid).catch(() => undefined);
    // After the chown (which may clear them): setuid/setgid are dropped, as a write to such a file drops them.
    await out.chmod(st.mode & 0o1777);
    await out.datasync();
    await out.close();
    await rename(tmp, path);
  } catch (err) {
    await out.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}
