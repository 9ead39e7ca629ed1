/**
 * JSONL scenario runner: records in -> expected records out, against the spawned service.
 *
 * Fixture format (one JSON value per line; see test/conformance/README.md):
 *   line 1  {"scenario": "...", "requirements": ["AS-..."], "args"?: [...], "bin"?: "magi-code",
 *            "env"?: {...}, "files"?: {"relative/path": "content" | <json>}}
 *   steps   {"send": <json>}                      one record, JSON-encoded + LF ("{{name}}" strings substituted)
 *           {"send_raw": "text"}                   written as-is (include \n / \r\n yourself)
 *           {"send_bytes_hex": "7b0a"}             raw bytes (invalid UTF-8 and the like)
 *           {"send_fill": {"prefix": "...", "byte": "a", "total": N, "suffix": "\n"}}  a record of exactly N bytes
 *                                                  before the suffix (for limit tests)
 *           {"expect": <pattern>}                  the next unread stdout record matches
 *           {"expect_unordered": [<pattern>...]}   the next N records match in some order
 *           {"eof": true}                          close stdin
 *           {"exit": 0}                            process exits with this code and printed nothing unread
 *           {"comment": "..."}
 * Header "fake_provider": {"turns"?: [FakeTurn...], "loop"?: bool, "api"?: "openai-chat"|..., "context_window"?: N}
 * starts the loopback fake provider (test/fakes) for the scenario and, unless `files` names settings.json, writes
 * settings selecting it as a no-auth custom provider. "{{fake_url}}" is pre-bound to its base URL.
 * Loopback fakes (header keys; their URLs are bound as {{oauth_url}} / {{models_url}} and substituted, also inside
 * longer strings, into `env` and `files` before the service starts):
 *   "fake_oauth": true | {behaviour overrides}       test/fakes/fake-oauth.ts (tokens contain SECRETMARKER)
 *   "fake_models": {"mode"?: ..., "models"?: [...]}  test/fakes/fake-models.ts
 * Fake steps:
 *           {"oauth_browser": {"url": "{{auth_url}}", "bind"?: "name", "follow"?: true, "state"?: "forged"}}
 *                                                  plays the browser at the fake issuer; `bind` binds the final redirect
 *                                                  URL (state replaced when `state` is given); `follow` GETs it (loopback
 *                                                  listener) and expects 200
 *           {"models_mode": "fresh" | "slow" | "failing" | "malformed"}
 *           {"models_close": true}                 drops every held models connection and stops the fake
 * Patterns: exact JSON equality, except the strings "$any", "$string", "$number", "$int", "$bool",
 * "$string_or_null", "$absent" (key must be missing), "{{name}}" (binds an opaque value on first use; {{version}} is pre-bound to package.json's version;
 * must be equal afterwards; works across sends and expects), and objects with "$partial": true (other keys ignored).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ServiceProcess } from "../helpers/service-process.js";
import { FakeOAuthIssuer, type FakeOAuthBehaviour } from "../fakes/fake-oauth.js";
import { FakeModelsServer, type ModelsMode } from "../fakes/fake-models.js";
import { MAGI_BIN, REPO_ROOT } from "../helpers/paths.js";
import { startFakeProvider, type FakeProvider, type FakeTurn } from "../fakes/fake-provider.js";
import { fakeSettings } from "../turns/helpers.js";

function packageVersion(): string {
  return (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;
}

export interface Scenario {
  file: string;
  header: {
    scenario: string;
    requirements: string[];
    args?: string[];
    bin?: string;
    env?: Record<string, string>;
    files?: Record<string, unknown>;
    fake_oauth?: true | Partial<FakeOAuthBehaviour>;
    fake_models?: { mode?: ModelsMode; models?: unknown[] };
    fake_provider?: { turns?: FakeTurn[]; loop?: boolean; api?: "openai-chat" | "openai-responses" | "anthropic"; context_window?: number };
  };
  steps: Array<Record<string, unknown>>;
}

export function loadScenario(file: string): Scenario {
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l.trim().length > 0);
  const parsed = lines.map((l, i) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      throw new Error(`${file}:${i + 1}: not JSON`);
    }
  });
  const [header, ...steps] = parsed;
  if (!header || typeof header.scenario !== "string" || !Array.isArray(header.requirements))
    throw new Error(`${file}: first line must be a scenario header`);
  return { file, header: header as Scenario["header"], steps };
}

type Bindings = Map<string, unknown>;

function substitute(v: unknown, b: Bindings): unknown {
  if (typeof v === "string") {
    const m = /^\{\{(\w+)\}\}$/.exec(v);
    if (m) {
      if (!b.has(m[1]!)) throw new Error(`unbound {{${m[1]}}} in send`);
      return b.get(m[1]!);
    }
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => substitute(x, b));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, b)]));
  return v;
}

/** Returns null on match, else a path-qualified reason. Bindings made by a failed match are discarded by the caller. */
export function match(pattern: unknown, actual: unknown, b: Bindings, path = "$"): string | null {
  if (typeof pattern === "string") {
    const m = /^\{\{(\w+)\}\}$/.exec(pattern);
    if (m) {
      const name = m[1]!;
      if (!b.has(name)) {
        if (actual === undefined) return `${path}: missing (binding ${name})`;
        b.set(name, actual);
        return null;
      }
      return JSON.stringify(b.get(name)) === JSON.stringify(actual) ? null : `${path}: expected bound ${name}=${JSON.stringify(b.get(name))}, got ${JSON.stringify(actual)}`;
    }
    switch (pattern) {
      case "$any": return actual === undefined ? `${path}: missing` : null;
      case "$string": return typeof actual === "string" ? null : `${path}: expected string`;
      case "$number": return typeof actual === "number" ? null : `${path}: expected number`;
      case "$int": return Number.isInteger(actual) ? null : `${path}: expected integer`;
      case "$bool": return typeof actual === "boolean" ? null : `${path}: expected boolean`;
      case "$string_or_null": return actual === null || typeof actual === "string" ? null : `${path}: expected string or null`;
    }
  }
  if (Array.isArray(pattern)) {
    if (!Array.isArray(actual)) return `${path}: expected array`;
    if (pattern.length !== actual.length) return `${path}: expected ${pattern.length} items, got ${actual.length}`;
    for (let i = 0; i < pattern.length; i++) {
      const r = match(pattern[i], actual[i], b, `${path}[${i}]`);
      if (r) return r;
    }
    return null;
  }
  if (pattern && typeof pattern === "object") {
    if (!actual || typeof actual !== "object" || Array.isArray(actual)) return `${path}: expected object, got ${JSON.stringify(actual)}`;
    const p = pattern as Record<string, unknown>;
    const a = actual as Record<string, unknown>;
    const partial = p.$partial === true;
    for (const [k, v] of Object.entries(p)) {
      if (k === "$partial") continue;
      if (v === "$absent") {
        if (k in a) return `${path}.${k}: expected absent`;
        continue;
      }
      const r = match(v, a[k], b, `${path}.${k}`);
      if (r) return r;
    }
    if (!partial) for (const k of Object.keys(a)) if (!(k in p)) return `${path}.${k}: unexpected field`;
    return null;
  }
  return JSON.stringify(pattern) === JSON.stringify(actual) ? null : `${path}: expected ${JSON.stringify(pattern)}, got ${JSON.stringify(actual)}`;
}

/** Replaces `{{name}}` occurrences inside strings (header env/files only). */
function substituteInside(v: unknown, urls: Record<string, string>): unknown {
  if (typeof v === "string") return v.replace(/\{\{(\w+)\}\}/g, (m: string, n: string) => urls[n] ?? m);
  if (Array.isArray(v)) return v.map((x) => substituteInside(x, urls));
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substituteInside(x, urls)]));
  return v;
}

export async function runScenario(s: Scenario): Promise<void> {
  const oauthFake = s.header.fake_oauth ? await FakeOAuthIssuer.start() : null;
  if (oauthFake && typeof s.header.fake_oauth === "object") Object.assign(oauthFake.behaviour, s.header.fake_oauth);
  const modelsFake = s.header.fake_models ? await FakeModelsServer.start() : null;
  if (modelsFake) {
    modelsFake.mode = s.header.fake_models?.mode ?? "fresh";
    modelsFake.models = s.header.fake_models?.models ?? [];
  }
  const fp = s.header.fake_provider;
  let providerFake: FakeProvider | null = null;
  if (fp !== undefined) {
    providerFake = await startFakeProvider({ loop: fp.loop === true });
    providerFake.script(fp.turns ?? []);
  }
  const urls: Record<string, string> = {};
  if (providerFake) urls.fake_url = providerFake.baseUrl;
  if (oauthFake) urls.oauth_url = oauthFake.url;
  if (modelsFake) urls.models_url = modelsFake.url;
  const svc = new ServiceProcess({
    args: s.header.bin === "magi-code" ? (s.header.args ?? ["--app", "service"]) : (s.header.args ?? ["service"]),
    ...(s.header.bin === "magi-code" ? { bin: MAGI_BIN } : {}),
    ...(s.header.env === undefined ? {} : { env: substituteInside(s.header.env, urls) as Record<string, string> }),
  });
  for (const [rel, content] of Object.entries((substituteInside(s.header.files ?? {}, urls) as Record<string, unknown>))) {
    const p = join(svc.home, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, typeof content === "string" ? content : JSON.stringify(content));
  }
  if (providerFake && fp !== undefined && !Object.keys(s.header.files ?? {}).includes("settings.json")) {
    const extra = { ...(fp.api !== undefined ? { api: fp.api } : {}), ...(fp.context_window !== undefined ? { contextWindow: fp.context_window } : {}) };
    writeFileSync(join(svc.home, "settings.json"), JSON.stringify(fakeSettings(providerFake.baseUrl, extra)));
  }
  const b: Bindings = new Map([["version", packageVersion()], ...Object.entries(urls)]);
  let cursor = 0;
  const next = async (): Promise<unknown> => {
    await svc.waitLines(cursor + 1);
    const line = svc.lines[cursor];
    if (line === undefined) throw new Error(`expected another record, service ended; stderr: ${svc.stderr.slice(0, 400)}`);
    cursor++;
    try {
      return JSON.parse(line);
    } catch {
      throw new Error(`stdout line ${cursor} is not JSON: ${line.slice(0, 200)}`);
    }
  };
  try {
    for (const [i, step] of s.steps.entries()) {
      const where = `${s.header.scenario} step ${i + 2}`;
      if ("comment" in step) continue;
      if ("send" in step) await svc.write(JSON.stringify(substitute(step.send, b)) + "\n");
      else if ("send_raw" in step) await svc.write(String(step.send_raw));
      else if ("send_bytes_hex" in step) await svc.write(Buffer.from(String(step.send_bytes_hex), "hex"));
      else if ("send_fill" in step) {
        const f = step.send_fill as { prefix?: string; byte?: string; total: number; suffix?: string };
        const prefix = Buffer.from(f.prefix ?? "");
        const body = Buffer.alloc(f.total - prefix.length, f.byte ?? "a");
        await svc.write(Buffer.concat([prefix, body, Buffer.from(f.suffix ?? "")]));
      } else if ("expect" in step) {
        const got = await next();
        const trial = new Map(b);
        const r = match(step.expect, got, trial);
        if (r) throw new Error(`${where}: ${r}\n  got: ${JSON.stringify(got)}`);
        for (const [k, v] of trial) b.set(k, v);
      } else if ("expect_unordered" in step) {
        const pats = step.expect_unordered as unknown[];
        const got: unknown[] = [];
        for (let k = 0; k < pats.length; k++) got.push(await next());
        const used = new Set<number>();
        for (const p of pats) {
          let ok = false;
          for (let k = 0; k < got.length && !ok; k++) {
            if (used.has(k)) continue;
            const trial = new Map(b);
            if (match(p, got[k], trial) === null) {
              used.add(k);
              for (const [kk, v] of trial) b.set(kk, v);
              ok = true;
            }
          }
          if (!ok) throw new Error(`${where}: no record matches ${JSON.stringify(p)}\n  got: ${JSON.stringify(got)}`);
        }
      } else if ("oauth_browser" in step) {
        if (!oauthFake) throw new Error(`${where}: oauth_browser needs "fake_oauth" in the header`);
        const o = step.oauth_browser as { url: string; bind?: string; follow?: boolean; state?: string };
        let redirect = await oauthFake.authorize(String(substitute(o.url, b)));
        if (o.state !== undefined) {
          const u = new URL(redirect);
          u.searchParams.set("state", o.state);
          redirect = u.href;
        }
        if (o.bind !== undefined) b.set(o.bind, redirect);
        if (o.follow) {
          const res = await fetch(redirect);
          await res.text();
          if (res.status !== 200) throw new Error(`${where}: loopback callback answered ${res.status}`);
        }
      } else if ("models_mode" in step) {
        if (!modelsFake) throw new Error(`${where}: models_mode needs "fake_models" in the header`);
        modelsFake.mode = step.models_mode as ModelsMode;
      } else if ("models_close" in step) {
        if (!modelsFake) throw new Error(`${where}: models_close needs "fake_models" in the header`);
        await modelsFake.close();
      } else if ("eof" in step) svc.end();
      else if ("exit" in step) {
        const { code } = await svc.exited;
        if (code !== step.exit) throw new Error(`${where}: exit code ${code}, expected ${String(step.exit)}; stderr: ${svc.stderr.slice(0, 400)}`);
        if (svc.lines.length > cursor) throw new Error(`${where}: unexpected output: ${svc.lines.slice(cursor).join("\n").slice(0, 400)}`);
        if (svc.partial !== "") throw new Error(`${where}: unterminated stdout line`);
      } else throw new Error(`${where}: unknown step ${JSON.stringify(step).slice(0, 100)}`);
    }
  } finally {
    if (svc.child.exitCode === null) svc.kill();
    await oauthFake?.close();
    if (modelsFake) await modelsFake.close().catch(() => undefined);
    await providerFake?.close();
  }
}
