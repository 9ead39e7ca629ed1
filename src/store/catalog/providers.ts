/**
 * The provider set: built-ins (`anthropic`, `openai-codex`) plus custom providers declared in the
 * GLOBAL settings file (`providers`). Project settings never declare providers: a cloned
 * repository must not be able to point a credential at its own endpoint.
 * Contracts: IDs are sorted and unique; custom IDs failing `isSafeId` are omitted; a custom entry
 * reusing a built-in ID is ignored (built-ins win). Fingerprints hash the provider's
 * configuration (never output; they only detect cache/config mismatch).
 */
import { sha256Hex } from "../../core/sha256.js";
import type { EnvLike } from "../home.js";
import type { ProviderDef, Settings } from "../settings/schema.js";
import { isSafeId, sanitizeLabel } from "./ids.js";

export const BUILTIN_PROVIDER_IDS = ["anthropic", "openai-codex"] as const;
export type BuiltinProviderId = (typeof BUILTIN_PROVIDER_IDS)[number];

export type ProviderEntry =
  | { id: BuiltinProviderId; label: string; builtin: true }
  | { id: string; label: string; builtin: false; def: ProviderDef };

export function isBuiltin(id: string): id is BuiltinProviderId {
  return (BUILTIN_PROVIDER_IDS as readonly string[]).includes(id);
}

function buildList(global: Settings): ProviderEntry[] {
  const out: ProviderEntry[] = BUILTIN_PROVIDER_IDS.map((id) => ({ id, label: id, builtin: true as const }));
  for (const [id, def] of Object.entries(global.providers ?? {})) {
    if (isBuiltin(id) || !isSafeId(id)) continue;
    out.push({ id, label: sanitizeLabel(def.label, id), builtin: false, def });
  }
  out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return out;
}

/**
 * The provider list of a deeply frozen settings layer (the shared layers a turn resolves from:
 * `SettingsStore.loadShared`), built once per layer object (an edited file is a new object; its entries frozen and
 * shared); any other layer's is built at each call. Every turn looked its provider up in a list built again (labels
 * sanitized, IDs checked, sorted) and fingerprinted it again (a `JSON.stringify` of its definition): ~20–40 µs of a
 * warm turn before its request (docs/scv.md, eleventh wave).
 */
const lists = new WeakMap<Settings, readonly ProviderEntry[]>();
/** Entries of those lists: their fingerprints are kept (`providerFingerprint`). */
const shared = new WeakSet<ProviderEntry>();
function entriesOf(global: Settings): readonly ProviderEntry[] {
  if (!Object.isFrozen(global) || (global.providers !== undefined && !Object.isFrozen(global.providers))) return buildList(global);
  let list = lists.get(global);
  if (list === undefined) {
    list = Object.freeze(buildList(global).map((e) => Object.freeze(e)));
    for (const e of list) shared.add(e);
    lists.set(global, list);
  }
  return list;
}

export function listProviders(global: Settings): ProviderEntry[] {
  return [...entriesOf(global)];
}

export function findProvider(global: Settings, id: string): ProviderEntry | undefined {
  return entriesOf(global).find((p) => p.id === id);
}

/** Default endpoint bases of the built-ins (overridable through env for tests and proxies). */
export function builtinBaseUrl(id: BuiltinProviderId, env: EnvLike): string {
  if (id === "anthropic") return nonEmpty(env["ANTHROPIC_BASE_URL"]) ?? "https://api.anthropic.com";
  return nonEmpty(env["BERTH_OPENAI_CODEX_BASE_URL"]) ?? "https://chatgpt.com/backend-api/codex";
}

/** Fingerprints of shared custom entries (`entriesOf`): a custom one depends on its frozen definition alone. */
const fingerprints = new WeakMap<ProviderEntry, string>();

export function providerFingerprint(entry: ProviderEntry, env: EnvLike): string {
  if (!entry.builtin && shared.has(entry)) {
    let fp = fingerprints.get(entry);
    if (fp === undefined) fingerprints.set(entry, (fp = fingerprintOf(entry, env)));
    return fp;
  }
  return fingerprintOf(entry, env);
}

function fingerprintOf(entry: ProviderEntry, env: EnvLike): string {
  const config = entry.builtin
    ? { v: 1, id: entry.id, base: builtinBaseUrl(entry.id, env) }
    : {
        v: 1,
        id: entry.id,
        api: entry.def.api,
        base: entry.def.base_url,
        key_env: entry.def.api_key_env ?? null,
        auth: entry.def.auth ?? null,
        models: entry.def.models,
      };
  const text = JSON.stringify(config);
  if (text !== lastFingerprint.text) lastFingerprint = { text, hash: sha256Hex(text) };
  return lastFingerprint.hash;
}

/** The last fingerprint computed: every turn of a process usually asks for the same provider's. */
let lastFingerprint = { text: "", hash: "" };

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}
