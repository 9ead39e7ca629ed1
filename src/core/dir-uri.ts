/**
 * The `file://` URI of a directory path a person typed (the web UI's New session dialog). Pure; runs in the browser,
 * which knows neither the daemon's home nor its working directory.
 *
 * Contract: an absolute POSIX path (`/…`) or Windows path (`C:\…`, `C:/…`) becomes a `file:` URI whose every segment
 * is percent-encoded, so `#`, `?` and `%` stay part of the path (`encodeURI` left `/tmp/a#b` as `file:///tmp/a#b`,
 * which names `/tmp/a`: the session ran in another directory). Text that already starts with `file:` is taken as a
 * URI. Anything else is an error saying what to type: `~` is not expanded, and a relative path has no base here.
 */
export type DirUri = { ok: true; uri: string } | { ok: false; error: string };

const WINDOWS = /^([A-Za-z]):[\\/]/;

export function directoryUri(typed: string): DirUri {
  const p = typed.trim();
  if (/^file:/i.test(p)) return { ok: true, uri: p };
  const seg = (s: string) => s.split(/\/+/).map(encodeURIComponent).join("/");
  if (p.startsWith("/")) return { ok: true, uri: `file://${seg(p)}` };
  const win = WINDOWS.exec(p);
  if (win) return { ok: true, uri: `file:///${win[1]!}:/${seg(p.slice(3).replaceAll("\\", "/"))}` };
  if (p.startsWith("~"))
    return { ok: false, error: "~ is not expanded here: type the directory's full path (for example /home/you/project), or leave it empty for the daemon's own" };
  return { ok: false, error: "type the directory's full path (starting with /), or leave it empty for the daemon's own: a relative path has no base here" };
}
