/**
 * The credential handoff of the `bin/berth` / `bin/magi-code` launchers (docs/security.md). When a launcher moved
 * credential-like variables out of the exec-time environment, `BERTH_HANDOFF_FD` names an inherited descriptor
 * holding `export -p` output (dash's `'…'` quoting, bash's `"…"` and `$'…'` quoting). Contracts:
 * - `adoptCredentialHandoff` reads that descriptor once, closes it (no child can inherit it), removes
 *   `BERTH_HANDOFF_FD` (and `BERTH_HANDOFF_PID` / `BERTH_HANDOFF_PPID`), and puts back into `process.env` exactly the
 *   handed-over variables whose names look like credentials (and are not already set). Values set this way are
 *   process memory only: they never appear in `/proc/<pid>/environ`, which shows the exec-time environment.
 * - Only a handoff made for this process is read: `BERTH_HANDOFF_PID` is this process (its launcher `exec`ed node
 *   in place) or `BERTH_HANDOFF_PPID` its parent (a Berth process started it). A `BERTH_HANDOFF_FD` inherited from
 *   elsewhere is dropped without touching its descriptor, which may be anything (a pipe nobody closes hung start-up).
 * `credentialHandoff` (core/secret-names.ts) builds the same hand-over for a child Berth process (`berth chat`
 * starting `berth stdio`, `berth open` starting the daemon; client/spawn-berth.ts).
 * Never throws; a malformed handoff is ignored (the variables it carried are then unset, as when absent).
 */
import { closeSync, readFileSync } from "node:fs";
import { HANDOFF_ENV, HANDOFF_PARENT_ENV, HANDOFF_PID_ENV, secretNameMatcher } from "../core/secret-names.js";

export function adoptCredentialHandoff(env: NodeJS.ProcessEnv = process.env, self = { pid: process.pid, ppid: process.ppid }): void {
  const raw = env[HANDOFF_ENV];
  const forPid = env[HANDOFF_PID_ENV];
  const fromPid = env[HANDOFF_PARENT_ENV];
  delete env[HANDOFF_ENV];
  delete env[HANDOFF_PID_ENV];
  delete env[HANDOFF_PARENT_ENV];
  if (raw === undefined) return;
  if (Number(forPid) !== self.pid && Number(fromPid) !== self.ppid) return; // not made for this process
  const fd = Number(raw);
  if (!Number.isInteger(fd) || fd < 3 || fd > 1_000_000) return;
  let text: string;
  try {
    text = readFileSync(fd, "utf8");
  } catch {
    return;
  } finally {
    try {
      closeSync(fd);
    } catch {
      /* not open */
    }
  }
  const secret = secretNameMatcher();
  for (const [name, value] of parseExportP(text)) if (secret(name) && env[name] === undefined) env[name] = value;
}

/** Parses `export -p` output into [name, value] pairs (variables without a value are skipped). */
export function parseExportP(text: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    // Each entry starts a line with `export ` (or `declare -x ` for bash outside POSIX mode).
    const m = /^(?:export|declare -x) ([A-Za-z_][A-Za-z0-9_]*)(=?)/.exec(text.slice(i, i + 300));
    if (m === null) {
      const nl = text.indexOf("\n", i);
      i = nl === -1 ? n : nl + 1;
      continue;
    }
    i += m[0].length;
    if (m[2] === "") {
      const nl = text.indexOf("\n", i);
      i = nl === -1 ? n : nl + 1;
      continue;
    }
    const word = readWord(text, i);
    out.push([m[1] as string, word.value]);
    i = word.end;
    const nl = text.indexOf("\n", i);
    i = nl === -1 ? n : nl + 1;
  }
  return out;
}

const C_ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", a: "\x07", b: "\b", e: "\x1b", E: "\x1b", f: "\f", v: "\v", "\\": "\\", "'": "'", '"': '"', "?": "?" };

/** One shell word starting at `i`: concatenated '…', "…", $'…' and unquoted parts, up to a blank or newline. */
function readWord(s: string, i: number): { value: string; end: number } {
  let v = "";
  while (i < s.length) {
    const c = s[i] as string;
    if (c === "'") {
      const close = s.indexOf("'", i + 1);
      const end = close === -1 ? s.length : close;
      v += s.slice(i + 1, end);
      i = end + 1;
    } else if (c === "$" && s[i + 1] === "'") {
      // ANSI-C quoting: numeric escapes are bytes (bash writes non-ASCII that way outside a UTF-8 locale).
      const bytes: number[] = [];
      i += 2;
      while (i < s.length && s[i] !== "'") {
        if (s[i] === "\\" && i + 1 < s.length) {
          const e = s[i + 1] as string;
          const hex = /^x([0-9A-Fa-f]{1,2})/.exec(s.slice(i + 1, i + 4));
          const oct = /^([0-7]{1,3})/.exec(s.slice(i + 1, i + 4));
          if (hex !== null) {
            bytes.push(parseInt(hex[1] as string, 16));
            i += 1 + hex[0].length;
          } else if (oct !== null) {
            bytes.push(parseInt(oct[1] as string, 8) & 0xff);
            i += 1 + oct[0].length;
          } else {
            bytes.push(...Buffer.from(C_ESCAPES[e] ?? `\\${e}`, "utf8"));
            i += 2;
          }
        } else {
          const ch = String.fromCodePoint(s.codePointAt(i) as number);
          bytes.push(...Buffer.from(ch, "utf8"));
          i += ch.length;
        }
      }
      v += Buffer.from(bytes).toString("utf8");
      i++;
    } else if (c === '"') {
      i++;
      while (i < s.length && s[i] !== '"') {
        if (s[i] === "\\" && i + 1 < s.length && '$`"\\\n'.includes(s[i + 1] as string)) {
          if (s[i + 1] !== "\n") v += s[i + 1];
          i += 2;
        } else v += s[i++];
      }
      i++;
    } else if (c === "\\" && i + 1 < s.length) {
      v += s[i + 1];
      i += 2;
    } else if (c === " " || c === "\t" || c === "\n") {
      break;
    } else {
      v += c;
      i++;
    }
  }
  return { value: v, end: i };
}
