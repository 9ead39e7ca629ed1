/**
 * `file://` working directories as AHP clients send them (store layer: it checks the filesystem,
 * and both the host and backends may use it). Contract of `localDirectoryFromUri`:
 * accepts only `file:` URIs whose host is empty or `localhost`, percent-decodes the path, and
 * answers `{ ok: true, path }` only when that path is an existing directory on this machine;
 * otherwise `{ ok: false, error }` with a fixed message (quoting at most a clipped copy of the
 * input). It never throws, whatever the input.
 */
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The input quoted in an error, cut to 64 characters (errors never echo unbounded input). */
function clip(v: string): string {
  const s = JSON.stringify(v.slice(0, 65));
  return s.length > 64 ? `${s.slice(0, 64)}…` : s;
}

export type WorkingDirectory = { ok: true; path: string } | { ok: false; error: string };

export function localDirectoryFromUri(uri: unknown): WorkingDirectory {
  if (typeof uri !== "string") return { ok: false, error: "a working directory must be a file:// URI string" };
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return { ok: false, error: `working directory ${clip(uri)} is not a valid URI` };
  }
  if (url.protocol !== "file:") return { ok: false, error: `working directory ${clip(uri)} is not a file:// URI` };
  if (url.hostname !== "" && url.hostname !== "localhost")
    return { ok: false, error: `working directory ${clip(uri)} names another host (${clip(url.hostname)}); only local directories are served` };
  let path: string;
  try {
    path = fileURLToPath(url); // percent-decodes; refuses encoded "/" (%2F) and NUL
  } catch {
    return { ok: false, error: `working directory ${clip(uri)} has an invalid path` };
  }
  try {
    if (!statSync(path).isDirectory()) return { ok: false, error: `working directory ${clip(uri)} is not a directory` };
  } catch {
    return { ok: false, error: `working directory ${clip(uri)} does not exist` };
  }
  return { ok: true, path };
}
