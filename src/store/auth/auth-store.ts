/**
 * The shared auth store: `$MC_HOME/auth.json`, owner-only (0600), atomically replaced, and
 * serialized across processes with a file lock.
 *
 * Contracts:
 * - Every provider has a generation (absent = 0). Every write touching a provider (login commit,
 *   refresh commit, API-key set, logout — even a logout with no record) advances it by one.
 * - `commitOAuth` commits only when the provider's generation still equals the one the caller
 *   observed before starting (login start, or refresh read); otherwise it writes nothing and
 *   answers `auth_changed`. The committed record replaces the old one whole: nothing (in
 *   particular no refresh token) is inherited from a previous record.
 * - Records of other providers and unknown top-level fields are preserved on every write.
 * - Any unreadable or malformed storage raises `AuthStorageError` (the adapter maps it to the fixed
 *   `internal_error`); the error never carries contents or the path.
 */
import { join } from "node:path";
import { lit, nullable, num, obj, rec, str, unknownValue } from "../validate.js";
import { JsonFileError, JsonFileMemo, readJsonFile, withFileLock, writeJsonAtomic } from "../settings/locked-json.js";

export const CODEX_PROVIDER_ID = "openai-codex";
export const ANTHROPIC_PROVIDER_ID = "anthropic";

export interface OAuthRecord {
  type: "oauth";
  access: string;
  /** `null` when the issuer granted no refresh token (or it was found revoked): login needed after expiry. */
  refresh: string | null;
  /** Epoch milliseconds. */
  expires_at: number;
  account_id: string | null;
}
export interface ApiKeyRecord {
  type: "api_key";
  key: string;
}
export const OAuthRecordSchema = obj<OAuthRecord>({
  type: lit("oauth"),
  access: str({ min: 1 }),
  refresh: nullable(str({ min: 1 })),
  expires_at: num({ int: true, nonnegative: true }),
  account_id: nullable(str({ min: 1 })),
});
export const ApiKeyRecordSchema = obj<ApiKeyRecord>({ type: lit("api_key"), key: str({ min: 1 }) });

interface AuthFile {
  version: 1;
  generations: Record<string, number>;
  records: Record<string, unknown>;
  [key: string]: unknown;
}
const AuthFileSchema = obj<AuthFile>(
  {
    version: lit(1),
    generations: rec(num({ int: true, nonnegative: true })),
    records: rec(unknownValue()),
  },
  "passthrough",
);

export class AuthStorageError extends Error {
  constructor(readonly reason: "unreadable" | "malformed" | "write_failed" | "lock_failed") {
    super(`auth storage ${reason}`);
    this.name = "AuthStorageError";
  }
}

/** An immutable, validated view of the store at one read. */
export interface AuthSnapshot {
  generation(providerId: string): number;
  readonly codex: OAuthRecord | null;
  readonly anthropic: ApiKeyRecord | null;
  has(providerId: string): boolean;
}

export type CommitOutcome = "committed" | "auth_changed";

export class AuthStore {
  readonly path: string;
  /** Read-side memo (re-read only when the file changes); `mutate` always reads fresh under the lock. */
  private readonly memo: JsonFileMemo<AuthFile>;

  /** `home` is the resolved MC_HOME; it must already exist (created 0700 at startup). */
  constructor(home: string) {
    this.path = join(home, "auth.json");
    this.memo = new JsonFileMemo(this.path, decodeAuthFile);
  }

  /** Reads current state (no lock needed: replacement is atomic). */
  async read(): Promise<AuthSnapshot> {
    try {
      return snapshot(await this.memo.read());
    } catch (err) {
      if (err instanceof AuthStorageError) throw err;
      throw new AuthStorageError(err instanceof JsonFileError && err.reason !== "unreadable" && err.reason !== "not_file" ? "malformed" : "unreadable");
    }
  }

  /** Commits an OAuth record if `expectedGeneration` is still current. See module contract. */
  async commitOAuth(providerId: string, expectedGeneration: number, record: OAuthRecord): Promise<CommitOutcome> {
    const parsed = OAuthRecordSchema.parse(record);
    return this.mutate((file) => {
      if ((file.generations[providerId] ?? 0) !== expectedGeneration) return "auth_changed";
      file.records[providerId] = parsed;
      file.generations[providerId] = expectedGeneration + 1;
      return "committed";
    });
  }

  /** Stores an API key (e.g. a CLI `login anthropic`), advancing the generation unconditionally. */
  async setApiKey(providerId: string, key: string): Promise<void> {
    const parsed = ApiKeyRecordSchema.parse({ type: "api_key", key });
    await this.mutate((file) => {
      file.records[providerId] = parsed;
      file.generations[providerId] = (file.generations[providerId] ?? 0) + 1;
    });
  }

  /** Removes only this provider's record; advances its generation even if no record existed. */
  async logout(providerId: string): Promise<{ removed: boolean }> {
    return this.mutate((file) => {
      const removed = Object.prototype.hasOwnProperty.call(file.records, providerId);
      delete file.records[providerId];
      file.generations[providerId] = (file.generations[providerId] ?? 0) + 1;
      return { removed };
    });
  }

  private async load(): Promise<AuthFile> {
    let raw: unknown;
    try {
      raw = await readJsonFile(this.path);
    } catch (err) {
      throw new AuthStorageError(err instanceof JsonFileError && err.reason !== "unreadable" && err.reason !== "not_file" ? "malformed" : "unreadable");
    }
    return decodeAuthFile(raw);
  }

  private async mutate<T>(fn: (file: AuthFile) => T): Promise<T> {
    try {
      return await withFileLock(this.path, async () => {
        const file = await this.load();
        const result = fn(file);
        await writeJsonAtomic(this.path, file, 0o600, { forceMode: true });
        return result;
      });
    } catch (err) {
      if (err instanceof AuthStorageError) throw err;
      if (err instanceof JsonFileError) throw new AuthStorageError(err.reason === "lock_failed" ? "lock_failed" : "write_failed");
      throw err;
    }
  }
}

function decodeAuthFile(raw: unknown): AuthFile {
  if (raw === undefined) return { version: 1, generations: {}, records: {} };
  const parsed = AuthFileSchema.safeParse(raw);
  if (!parsed.success) throw new AuthStorageError("malformed");
  const file = parsed.data;
  // Known records must be well-formed; unknown providers' records are preserved as they are.
  const codex = file.records[CODEX_PROVIDER_ID];
  if (codex !== undefined && !OAuthRecordSchema.safeParse(codex).success) throw new AuthStorageError("malformed");
  const anthropic = file.records[ANTHROPIC_PROVIDER_ID];
  if (anthropic !== undefined && !ApiKeyRecordSchema.safeParse(anthropic).success) throw new AuthStorageError("malformed");
  return file;
}

function snapshot(file: AuthFile): AuthSnapshot {
  const codexRaw = file.records[CODEX_PROVIDER_ID];
  const anthropicRaw = file.records[ANTHROPIC_PROVIDER_ID];
  const generations = { ...file.generations };
  const ids = new Set(Object.keys(file.records));
  return {
    generation: (id) => generations[id] ?? 0,
    codex: codexRaw === undefined ? null : OAuthRecordSchema.parse(codexRaw),
    anthropic: anthropicRaw === undefined ? null : ApiKeyRecordSchema.parse(anthropicRaw),
    has: (id) => ids.has(id),
  };
}
