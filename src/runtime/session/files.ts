/**
 * File checks a door needs before it opens a session or submits attachments (doors never touch files themselves).
 *
 * - `canonicalWorkspace(path)`: an absolute path to an existing directory, resolved through symlinks (`realpath`).
 *   A relative, missing or non-directory path is refused with a fixed message. `canonicalWorkspaceSync` is the same
 *   check with the same syscalls (the native realpath and a stat), for a caller that must not yield before its next
 *   step (a new session's file creation, which is synchronous up to its fsyncs).
 * - `checkAttachmentFiles(list)`: each `path` must be absolute and name a regular file that is not a symlink
 *   (checked with `lstat`, no following), and its declared `size` must be its size now. Refusals name the attachment by
 *   index, never echo file contents. Never throws.
 */
import { lstat, realpath, stat } from "node:fs/promises";
import { realpathSync, statSync } from "node:fs";
import { isAbsolute } from "node:path";

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

export async function canonicalWorkspace(path: string): Promise<Checked<string>> {
  if (!isAbsolute(path)) return { ok: false, message: "cwd must be an absolute path" };
  let real: string;
  try {
    real = await realpath(path);
  } catch {
    return { ok: false, message: "cwd does not exist" };
  }
  try {
    if (!(await stat(real)).isDirectory()) return { ok: false, message: "cwd is not a directory" };
  } catch {
    return { ok: false, message: "cwd does not exist" };
  }
  return { ok: true, value: real };
}

export function canonicalWorkspaceSync(path: string): Checked<string> {
  if (!isAbsolute(path)) return { ok: false, message: "cwd must be an absolute path" };
  let real: string;
  try {
    real = realpathSync.native(path);
  } catch {
    return { ok: false, message: "cwd does not exist" };
  }
  try {
    if (!statSync(real).isDirectory()) return { ok: false, message: "cwd is not a directory" };
  } catch {
    return { ok: false, message: "cwd does not exist" };
  }
  return { ok: true, value: real };
}

export interface AttachmentFile {
  path: string;
  size: number;
}

export async function checkAttachmentFiles(list: readonly AttachmentFile[]): Promise<Checked<null>> {
  for (const [i, a] of list.entries()) {
    if (!isAbsolute(a.path)) return { ok: false, message: `attachment ${i}: path must be absolute` };
    let st;
    try {
      st = await lstat(a.path);
    } catch {
      return { ok: false, message: `attachment ${i}: file not found` };
    }
    if (st.isSymbolicLink()) return { ok: false, message: `attachment ${i}: path is a symlink; send the file itself` };
    if (!st.isFile()) return { ok: false, message: `attachment ${i}: path is not a regular file` };
    if (st.size !== a.size) return { ok: false, message: `attachment ${i}: declared size ${a.size} does not match the file (${st.size} bytes)` };
  }
  return { ok: true, value: null };
}
