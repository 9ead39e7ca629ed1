/**
 * Checks `berth chat` makes before its first turn, so a broken setup is named in one line instead of a failed turn:
 * settings that cannot be read (file path, line and column for malformed JSON; the JSON path and reason for a
 * value of the wrong shape), an `MC_PROVIDER` naming no provider, a provider whose key variable is unset, a model
 * the provider does not list, a settings file that is a symbolic link to nothing. Reads files only; never the
 * network; never prints a credential. A key variable is checked where the turns run: not in this environment when a
 * daemon runs them (`keyHere`).
 * A failure's `message` is one line without terminal controls (terminalSafe): it quotes settings values, paths and
 * parser messages, and a project's `.berth/settings.json` (a cloned repository's file) is read before any trust.
 */
import { readlink, stat } from "node:fs/promises";
import { join } from "node:path";
import { AuthStore } from "../../store/auth/auth-store.js";
import { CatalogCache } from "../../store/catalog/cache.js";
import { listProviders, providerFingerprint } from "../../store/catalog/providers.js";
import { resolveHome, type EnvLike } from "../../store/home.js";
import { readRegularFile } from "../../store/regular-file.js";
import { approvalPolicyOf, DEFAULT_PROVIDER_ID, ignoredApprovalPolicyNote, resolveSelection } from "../../store/settings/effective.js";
import { MAX_JSON_DEPTH, MAX_JSON_FILE_BYTES } from "../../store/settings/locked-json.js";
import { checkJsonBounds } from "../../core/json-bounds.js";
import { SettingsSchema, type ApprovalPolicySetting } from "../../store/settings/schema.js";
import { SettingsStore, type SettingsLayers } from "../../store/settings/settings-store.js";
import { issuePath } from "../../store/validate.js";
import { looksLikeKey, redactSecrets } from "../../core/text-policy.js";
import { terminalSafe } from "../terminal-safe.js";
import { firstInvalidUtf8 } from "../../core/utf8.js";

export type Preflight =
  | {
      ok: true;
      provider: string;
      model: string | null;
      approvalPolicy: ApprovalPolicySetting;
      /** Why a project's looser `approval_policy` was not applied (print it), else null. */
      approvalNote: string | null;
      baseUrl: string | null;
      layers: SettingsLayers;
    }
  /** `noProvider`: the generic "how to set up a provider" help applies. */
  | { ok: false; message: string; noProvider: boolean };

/** Line and column (1-based) of a character offset. */
function lineCol(text: string, pos: number): { line: number; col: number } {
  const before = text.slice(0, pos);
  const line = before.split("\n").length;
  return { line, col: pos - before.lastIndexOf("\n") };
}

/** What the scanner wanted where it stopped. */
type Expected = "key" | "colon" | "comma_or_brace" | "comma_or_bracket" | "value" | "string" | "end";

/** Where `jsonSyntaxError`'s scanner stopped (thrown to unwind its recursion). */
class SyntaxAt extends Error {
  constructor(
    readonly pos: number,
    readonly expected: Expected,
  ) {
    super(`JSON syntax error at offset ${pos}`);
  }
}

/** The first JSON syntax error in `t` (a small validating scanner): its offset and what was expected there, or null. */
export function jsonSyntaxError(t: string): { pos: number; expected: Expected } | null {
  let i = 0;
  const ws = (): void => {
    while (i < t.length && " \t\n\r".includes(t[i]!)) i++;
  };
  const fail = (expected: Expected): never => {
    throw new SyntaxAt(i, expected);
  };
  const lit = (w: string): void => {
    const at = i;
    for (const c of w) {
      if (t[i++] !== c) {
        i = at;
        fail("value");
      }
    }
  };
  const str = (): void => {
    i++;
    for (;;) {
      if (i >= t.length) fail("string");
      const c = t[i]!;
      if (c === '"') return void i++;
      if (c < " ") fail("string");
      if (c === "\\") {
        i++;
        if (t[i] === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(t.slice(i + 1, i + 5))) fail("string");
          i += 5;
        } else if (t[i] !== undefined && '"\\/bfnrt'.includes(t[i]!)) i++;
        else fail("string");
      } else i++;
    }
  };
  const value = (): void => {
    ws();
    const c = t[i];
    if (c === "{") {
      i++;
      ws();
      if (t[i] === "}") return void i++;
      for (;;) {
        ws();
        if (t[i] !== '"') fail("key");
        str();
        ws();
        if (t[i] !== ":") fail("colon");
        i++;
        value();
        ws();
        if (t[i] === ",") i++;
        else if (t[i] === "}") return void i++;
        else fail("comma_or_brace");
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (t[i] === "]") return void i++;
      for (;;) {
        value();
        ws();
        if (t[i] === ",") i++;
        else if (t[i] === "]") return void i++;
        else fail("comma_or_bracket");
      }
    }
    if (c === '"') return str();
    if (c === "t") return lit("true");
    if (c === "f") return lit("false");
    if (c === "n") return lit("null");
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(t.slice(i, i + 400));
    if (m === null) fail("value");
    i += m![0].length;
  };
  try {
    value();
    ws();
    return i < t.length ? { pos: i, expected: "end" } : null;
  } catch (e) {
    // Anything else (a stack overflow on absurd nesting) is reported at the start.
    return e instanceof SyntaxAt ? { pos: Math.min(e.pos, t.length), expected: e.expected } : { pos: 0, expected: "value" };
  }
}

/** The offset of the first JSON syntax error in `t`, or -1 when it is valid. */
export function jsonErrorOffset(t: string): number {
  return jsonSyntaxError(t)?.pos ?? -1;
}

/** A character named by its kind: punctuation quoted, anything that may belong to a value never. */
function kindOf(c: string): string {
  if (/[{}[\]:,"/]/.test(c)) return `'${c}'`;
  if (c === "'") return `"'"`;
  if (/[A-Za-z_$]/.test(c)) return "letter";
  if (/[0-9-]/.test(c)) return "number";
  return `character U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
}

/**
 * What the scanner met, by its kind and what it expected there, with the fix for the usual slips; never quoted from
 * the file: a settings file holds API keys and header values, and the text at a syntax error is often exactly such an
 * unquoted value. Line and column locate it.
 */
function unexpected(text: string, err: { pos: number; expected: Expected }): string {
  const { pos, expected } = err;
  if (pos >= text.length) return expected === "string" ? `unexpected end of file inside a string: close it with '"'` : "unexpected end of file";
  const c = text[pos]!;
  let before = pos - 1;
  while (before >= 0 && " \t\r\n".includes(text[before]!)) before--;
  const trailing = text[before] === ",";
  const what = `unexpected ${kindOf(c)}`;
  if (c === "/" && expected !== "string") return `${what}: JSON has no comments`;
  switch (expected) {
    case "key":
      if (c === "}" && trailing) return `${what}: remove the trailing comma before it`;
      if (c === "'") return `${what}: JSON strings take double quotes`;
      if (/[A-Za-z_$]/.test(c)) return `${what}: keys need double quotes`;
      return `${what} where a key in double quotes was expected`;
    case "colon":
      return `${what}: a ':' is missing after the key`;
    case "comma_or_brace":
    case "comma_or_bracket":
      if (/["{[0-9A-Za-z_$-]/.test(c)) return `${what}: a comma is missing before it`;
      return `${what} where ',' or '${expected === "comma_or_brace" ? "}" : "]"}' was expected`;
    case "value":
      if ((c === "]" || c === "}") && trailing) return `${what}: remove the trailing comma before it`;
      if (c === "'") return `${what}: JSON strings take double quotes`;
      if (/[A-Za-z_$]/.test(c)) return `${what}: strings need double quotes (true, false and null are lower case)`;
      return `${what} where a value was expected`;
    case "string":
      return c < " " ? `${what} inside a string: escape it (\\n, \\t) or close the string with '"'` : `${what}: an invalid escape in a string`;
    case "end":
      return `${what} after the settings object: remove it, or put both in one object`;
  }
}

/** The cause and fix for a settings file nested past MAX_JSON_DEPTH (the store's `too_deep`). */
const TOO_DEEP = `nests values deeper than settings may (${MAX_JSON_DEPTH} levels of objects and arrays); flatten it or remove the deep value`;

/** Whether brackets outside strings in `t` open more than `max` levels at some point (JSON text, valid or not). */
function textDepthExceeds(t: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c === 0x22) {
      // Skip a string: to its closing quote, over escapes.
      for (i++; i < t.length && t.charCodeAt(i) !== 0x22; i++) if (t.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** `s` as one shell word, to paste into a command: quoted only when it holds a character the shell would read. */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

/**
 * The command that makes an unreadable `path` readable by this process's user: `chmod 600` on their own file; on
 * another user's (one `sudo` wrote), taking it over first, since chmod alone would be refused.
 */
async function accessFix(path: string): Promise<string> {
  const q = shellWord(path);
  const owner = await stat(path).then(
    (st) => st.uid,
    () => undefined,
  );
  const me = process.getuid?.();
  if (owner !== undefined && me !== undefined && owner !== me) return `it belongs to another user: sudo chown "$(id -un)" ${q} && chmod 600 ${q}`;
  return `make it readable by you: chmod 600 ${q}`;
}

/** Why a settings file failed to load, as precisely as the file allows. */
export async function explainSettings(path: string): Promise<string> {
  let text: string;
  try {
    // Opened non-blocking and checked first: a FIFO in its place is named, never waited on.
    const buf = await readRegularFile(path, MAX_JSON_FILE_BYTES);
    const bad = firstInvalidUtf8(buf);
    if (bad !== -1) {
      const before = buf.subarray(0, bad).toString("utf8");
      const where = lineCol(before, before.length);
      return `${path}: is not UTF-8 text (line ${where.line}, column ${where.col}); save it as UTF-8`;
    }
    text = buf.toString("utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "EISDIR") return `${path}: is a directory; settings.json must be a file (remove the directory or write {} into a file there)`;
    if (code === "ENOTREG") return `${path}: is not a regular file (a FIFO, socket or device); settings.json must be a file (remove it or write {} into a file there)`;
    if (code === "EFBIG") return `${path}: the file is larger than settings files may be (${MAX_JSON_FILE_BYTES / (1024 * 1024)} MiB)`;
    if (code === "EACCES" || code === "EPERM") return `${path}: cannot be read (${code}: permission denied); ${await accessFix(path)}`;
    return `${path}: cannot be read${typeof code === "string" && /^E[A-Z]{1,15}$/.test(code) ? ` (${code})` : ""}`;
  }
  // A leading byte order mark (Windows editors write one) is not part of the JSON; the store skips it too.
  if (text.startsWith("\uFEFF")) text = text.slice(1);
  if (text.trim() === "") return `${path}: the file is empty (write {} for no settings)`;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    // Unbalanced text can still be too deep for the syntax scanner's recursion: the depth is the cause to name.
    if (textDepthExceeds(text, MAX_JSON_DEPTH)) return `${path}: ${TOO_DEEP}`;
    const err = jsonSyntaxError(text) ?? { pos: 0, expected: "value" as const };
    const where = lineCol(text, err.pos);
    return `${path}:${where.line}:${where.col}: malformed JSON (${unexpected(text, err)})`;
  }
  if (checkJsonBounds(raw, { maxDepth: MAX_JSON_DEPTH, maxArrayItems: Infinity, maxObjectFields: Infinity, maxStringBytes: Infinity }) !== null) return `${path}: ${TOO_DEEP}`;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return `${path}: the settings must be a JSON object`;
  const parsed = SettingsSchema.safeParse(raw);
  if (parsed.success) return `${path}: could not be loaded`;
  const issue = parsed.error.issues[0]!;
  // The message may quote the value ("received '…'"): a key pasted into the wrong field is redacted.
  return `${path}: ${issuePath(issue.path)}: ${redactSecrets(issue.message)}`;
}

export interface PreflightOptions {
  /**
   * Whether the turns run with `env` (a `berth stdio` child or the in-process server inherit it); false when a daemon
   * runs them, with the daemon's own environment. Asked only when a key is missing from `env`: the key check is then
   * left to the daemon, whose turn failure names the variable (hints.ts says where the daemon reads it).
   */
  keyHere?: () => Promise<boolean>;
}

/**
 * Why `path` is a symbolic link to nothing (a dotfiles link whose target moved), else null. Every store reads such a
 * file as absent, so its settings (providers, the approval policy) would be dropped without a word.
 */
async function danglingLink(path: string): Promise<string | null> {
  const target = await readlink(path).catch(() => null);
  if (target === null) return null;
  const gone = await stat(path).then(() => false, (e: NodeJS.ErrnoException) => e.code === "ENOENT");
  return gone ? `${path} is a symbolic link to ${target}, which does not exist; fix the link (or remove it to use no settings)` : null;
}

export async function preflight(env: EnvLike, cwd: string, opts: PreflightOptions = {}): Promise<Preflight> {
  const r = await check(env, cwd, opts.keyHere ?? (() => Promise.resolve(true)));
  // Every caller prints the message: a repository's provider name must not retitle the window or set the clipboard.
  return r.ok ? r : { ...r, message: terminalSafe(r.message, false) };
}

async function check(env: EnvLike, cwd: string, keyHere: () => Promise<boolean>): Promise<Preflight> {
  const home = resolveHome(env);
  const settings = new SettingsStore({ home, projectDir: cwd, env });
  let layers: SettingsLayers;
  try {
    const [loaded, dangling] = await Promise.all([settings.load(), Promise.all([danglingLink(settings.pathOf("global")), danglingLink(settings.pathOf("project"))])]);
    const why = dangling.find((d) => d !== null);
    if (why !== undefined && why !== null) return { ok: false, message: `settings: ${why}`, noProvider: false };
    layers = loaded;
  } catch (err) {
    const scope = (err as { scope?: unknown }).scope === "project" ? "project" : "global";
    return { ok: false, message: `settings: ${await explainSettings(settings.pathOf(scope))}`, noProvider: false };
  }
  const sel = resolveSelection(layers);
  const providers = listProviders(layers.global);
  const entry = providers.find((p) => p.id === sel.provider_id);
  const names = providers.map((p) => p.id).join(", ");
  if (entry === undefined) {
    const from = layers.env.provider !== undefined ? `MC_PROVIDER=${sel.provider_id}` : `the settings' provider "${sel.provider_id}"`;
    return { ok: false, message: `${from} names no known provider (known: ${names}; custom providers go under "providers" in ${join(home, "settings.json")})`, noProvider: false };
  }
  // The model is checked against the provider's models in settings, else its cached catalog (no network).
  // Only a fresh catalog is trusted to refuse a model (a stale one may predate it).
  // The catalog is read only when the settings list no models (it is not consulted otherwise).
  const statics = entry.builtin ? [] : entry.def.models.filter((m) => m.disabled !== true).map((m) => m.id);
  const view = statics.length > 0 ? null : await new CatalogCache({ home }).read(entry.id, providerFingerprint(entry, env)).catch(() => null);
  const cached = view?.state === "fresh_cache" ? view.models.filter((m) => !m.disabled).map((m) => m.model_id) : [];
  const models = statics.length > 0 ? statics : cached;
  if (sel.model_id !== null && models.length > 0 && !models.includes(sel.model_id)) {
    const from = layers.env.model !== undefined ? `MC_MODEL=${sel.model_id}` : `model "${sel.model_id}"`;
    return { ok: false, message: `${from} is not a model of provider ${entry.id} (${suggest(sel.model_id, models)})`, noProvider: false };
  }
  if (!entry.builtin) {
    const v = entry.def.api_key_env;
    if (v !== undefined && (env[v] === undefined || env[v] === "") && (looksLikeKey(v) || (await keyHere()))) {
      // A key pasted where the variable's name belongs is never echoed.
      // Custom providers live in the global settings only: that file names the variable.
      const file = settings.pathOf("global");
      const message = looksLikeKey(v)
        ? `provider ${entry.id}'s api_key_env in ${file} must name an environment variable (such as MY_PROVIDER_KEY) holding the key, not the key itself; move the key into that variable`
        : `provider ${entry.id} reads its API key from ${v} (its api_key_env in ${file}), which is not set; set ${v} to the key where berth chat starts (export ${v}=…), or name the variable holding it in api_key_env`;
      return { ok: false, message, noProvider: false };
    }
  } else {
    const snap = await new AuthStore(home).read().catch(() => null);
    const ready = entry.id === "openai-codex" ? snap?.codex != null : (env["ANTHROPIC_API_KEY"] ?? "") !== "" || snap?.anthropic != null;
    // A daemon's ANTHROPIC_API_KEY is its own (a sign-in is stored in the home, which both read).
    if (!ready && (entry.id === "openai-codex" || (await keyHere()))) {
      const unselected = customUnselected(layers, providers, join(home, "settings.json"));
      return unselected === null ? { ok: false, message: "No model provider is ready.", noProvider: true } : { ok: false, message: unselected, noProvider: false };
    }
  }
  const { policy, ignoredProject } = approvalPolicyOf(layers);
  const approvalNote = ignoredProject === null ? null : ignoredApprovalPolicyNote(ignoredProject, policy);
  const baseUrl = entry.builtin ? null : entry.def.base_url;
  return { ok: true, provider: sel.provider_id, model: sel.model_id, approvalPolicy: policy, approvalNote, baseUrl, layers };
}

/**
 * When no layer selects a provider (so the default, a built-in without credentials, was chosen) and the settings
 * declare custom providers: the message naming them and how to select one. A new user who declared a local server
 * under "providers" otherwise got the generic help. Null when a provider was selected or none is declared.
 */
function customUnselected(layers: SettingsLayers, providers: ReturnType<typeof listProviders>, file: string): string | null {
  if (layers.env.provider !== undefined || layers.project.provider !== undefined || layers.global.provider !== undefined) return null;
  const custom = providers.filter((p) => !p.builtin);
  const first = custom[0];
  if (first === undefined || first.builtin) return null;
  const model = first.def.models.find((m) => m.disabled !== true)?.id;
  const names = custom.map((p) => `"${p.id}"`).join(", ");
  const pick = model === undefined ? `"provider": "${first.id}"` : `"provider": "${first.id}", "model": "${model}"`;
  const envPick = model === undefined ? `MC_PROVIDER=${first.id}` : `MC_PROVIDER=${first.id} MC_MODEL=${model}`;
  const declared = custom.length === 1 ? `declares provider ${names}` : `declares providers ${names}`;
  return `no provider is selected, so the default (${DEFAULT_PROVIDER_ID}) was tried, and it has no credentials. ${file} ${declared}, but nothing selects it: add ${pick} to that file, or start with ${envPick}`;
}

/** "did you mean a, b?" from the closest names (by edit distance), else the list. */
export function suggest(name: string, known: string[]): string {
  const d = (a: string, b: string): number => {
    const row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0]!;
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = row[j]!;
        row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return row[b.length]!;
  };
  const close = known.map((k) => ({ k, d: d(name.toLowerCase(), k.toLowerCase()) })).filter((x) => x.d <= Math.max(2, name.length / 3)).sort((a, b) => a.d - b.d);
  return close.length > 0 ? `did you mean ${close.slice(0, 3).map((x) => x.k).join(", ")}?` : `known models: ${known.slice(0, 10).join(", ")}`;
}
