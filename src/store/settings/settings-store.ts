/**
 * Layered settings: environment (`MC_PROVIDER` / `MC_MODEL`) > project
 * (`<launch cwd>/.berth/settings.json`) > global (`$MC_HOME/settings.json`).
 *
 * Contracts:
 * - `load()` rereads both files on every call (no caching), so every caller sees writes made by
 *   other processes. A missing file is an empty layer; an unreadable, non-UTF-8, unparseable, too deeply
 *   nested (locked-json.ts's MAX_JSON_DEPTH) or schema-invalid file raises `SettingsError` (never its content or path).
 * - `update(scope, fn)` runs `fn` on the raw JSON document of that scope under the scope's file
 *   lock, validates the result against `SettingsSchema`, then replaces the file atomically (0600;
 *   the project `.berth` directory is created 0700 if missing). Unknown fields and fields `fn` does
 *   not touch are preserved byte-for-value. A malformed existing file is never overwritten.
 * - Custom `providers` and `mcp_servers` are read from the global layer only (see providers.ts).
 */
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { EnvLike } from "../home.js";
import { JsonFileError, JsonFileMemo, readJsonFile, withFileLock, writeJsonAtomic } from "./locked-json.js";
import { SettingsSchema, type Settings } from "./schema.js";
import { issuePath } from "../validate.js";

export type SettingsScope = "global" | "project";

export class SettingsError extends Error {
  constructor(
    readonly scope: SettingsScope,
    readonly reason: "unreadable" | "not_file" | "too_large" | "too_deep" | "not_utf8" | "malformed" | "invalid" | "write_failed" | "lock_failed",
    /** For `invalid`: where the first wrong setting is (a JSON path of keys: no value of the document). */
    readonly at?: string,
  ) {
    super(`settings ${scope} ${reason}`);
    this.name = "SettingsError";
  }
}

/** A failed read of a settings file as a `SettingsError` reason. */
function readReason(err: unknown): SettingsError["reason"] {
  if (!(err instanceof JsonFileError)) return "malformed";
  const r = err.reason;
  return r === "unreadable" || r === "not_file" || r === "too_large" || r === "too_deep" || r === "not_utf8" ? r : "malformed";
}

export interface SettingsLayers {
  env: { provider?: string; model?: string };
  project: Settings;
  global: Settings;
}

export type RawDocument = Record<string, unknown>;

/** How many settings files' memos the process keeps (the global file and one project file per directory used). */
const SHARED_MEMOS = 64;
/**
 * The read-side memos, by scope and path, shared by every `SettingsStore` of the process: a fresh process builds
 * several stores over the same files (a client's checks, the server, the agent), and each then finds the file read
 * and decoded once. A memo re-reads a file whose identity changed (locked-json.ts), as one store's memo does.
 */
const sharedMemos = new Map<string, JsonFileMemo<Settings>>();

function sharedMemo(scope: SettingsScope, path: string): JsonFileMemo<Settings> {
  const key = `${scope}\0${path}`;
  let memo = sharedMemos.get(key);
  if (memo === undefined) {
    memo = new JsonFileMemo(path, (raw) => decodeScope(scope, raw).settings);
    if (sharedMemos.size >= SHARED_MEMOS) sharedMemos.delete(sharedMemos.keys().next().value!);
  } else sharedMemos.delete(key);
  sharedMemos.set(key, memo); // most recently used last
  return memo;
}

export interface SettingsStoreOptions {
  /** Resolved MC_HOME (must exist). */
  home: string;
  /** The service's launch working directory (project scope root). */
  projectDir: string;
  /** Read on every `load()` so tests and the process see the current environment. */
  env: EnvLike;
}

export class SettingsStore {
  readonly globalPath: string;
  readonly projectPath: string;
  private readonly projectDir: string;
  private readonly env: EnvLike;
  /** Read-side memos for `load()`; writes always read fresh under the lock. */
  private readonly memo: Record<SettingsScope, JsonFileMemo<Settings>>;
  /** The last `loadShared()` result. */
  private shared: Readonly<SettingsLayers> | null = null;

  constructor(opts: SettingsStoreOptions) {
    this.globalPath = join(opts.home, "settings.json");
    this.projectPath = join(opts.projectDir, ".berth", "settings.json");
    this.projectDir = opts.projectDir;
    this.env = opts.env;
    this.memo = { global: sharedMemo("global", this.globalPath), project: sharedMemo("project", this.projectPath) };
  }

  pathOf(scope: SettingsScope): string {
    return scope === "global" ? this.globalPath : this.projectPath;
  }

  async load(): Promise<SettingsLayers> {
    const [global, project] = await Promise.all([this.readMemo("global"), this.readMemo("project")]);
    return { env: envLayer(this.env), project, global };
  }

  /**
   * As `load()` (both files checked, the environment read), without copies: the layers are deeply frozen, and the
   * very same object is returned while neither file's remembered identity nor the environment layer changed, so a
   * hot path (a turn's provider resolution) may key its own memos on it. Callers must not mutate it.
   */
  async loadShared(): Promise<Readonly<SettingsLayers>> {
    const [global, project] = await Promise.all([this.readMemo("global", true), this.readMemo("project", true)]);
    const env = envLayer(this.env);
    const last = this.shared;
    if (last !== null && last.global === global && last.project === project && last.env.provider === env.provider && last.env.model === env.model) return last;
    return (this.shared = Object.freeze({ env: Object.freeze(env), project, global }));
  }

  /**
   * Locked read-modify-write of one scope. `fn` mutates the raw document in place and returns a
   * value, or throws to abort without writing. Resolves after the atomic replacement.
   */
  async update<T>(scope: SettingsScope, fn: (doc: RawDocument) => T | Promise<T>): Promise<T> {
    const path = this.pathOf(scope);
    try {
      if (scope === "project") await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    } catch {
      throw new SettingsError(scope, "write_failed");
    }
    try {
      // A project's file is a cloned repository's: written through a link only to a target inside the project.
      const within = scope === "project" ? this.projectDir : undefined;
      return await withFileLock(
        path,
        async () => {
          const { raw } = await this.readScope(scope);
          const doc: RawDocument = raw ?? {};
          const result = await fn(doc);
          if (!SettingsSchema.safeParse(doc).success) throw new SettingsError(scope, "invalid");
          await writeJsonAtomic(path, doc, 0o600, within !== undefined ? { within } : {});
          return result;
        },
        within,
      );
    } catch (err) {
      if (err instanceof JsonFileError) throw new SettingsError(scope, err.reason === "lock_failed" ? "lock_failed" : "write_failed");
      throw err;
    }
  }

  private async readMemo(scope: SettingsScope, shared = false): Promise<Settings> {
    try {
      return await (shared ? this.memo[scope].readShared() : this.memo[scope].read());
    } catch (err) {
      if (err instanceof SettingsError) throw err;
      throw new SettingsError(scope, readReason(err));
    }
  }

  private async readScope(scope: SettingsScope): Promise<{ raw: RawDocument | undefined; settings: Settings }> {
    let raw: unknown;
    try {
      raw = await readJsonFile(this.pathOf(scope));
    } catch (err) {
      throw new SettingsError(scope, readReason(err));
    }
    return decodeScope(scope, raw);
  }
}

function decodeScope(scope: SettingsScope, raw: unknown): { raw: RawDocument | undefined; settings: Settings } {
  if (raw === undefined) return { raw: undefined, settings: {} };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new SettingsError(scope, "malformed");
  const parsed = SettingsSchema.safeParse(raw);
  if (!parsed.success) throw new SettingsError(scope, "invalid", issuePath(parsed.error.issues[0]?.path ?? []).slice(0, 200));
  const settings = parsed.data;
  if (settings.mcp_servers === undefined && settings.mcpServers !== undefined) settings.mcp_servers = settings.mcpServers;
  return { raw: raw as RawDocument, settings };
}

function envLayer(env: EnvLike): SettingsLayers["env"] {
  const out: SettingsLayers["env"] = {};
  const p = env["MC_PROVIDER"];
  const m = env["MC_MODEL"];
  if (p !== undefined && p !== "") out.provider = p;
  if (m !== undefined && m !== "") out.model = m;
  return out;
}
