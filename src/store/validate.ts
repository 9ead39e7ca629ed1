/**
 * A small structural validator for the JSON documents the stores own (settings, auth, catalog cache), used instead of
 * zod on the first-turn path (loading zod cost more than a whole settings read; issue 19).
 * Semantics follow the zod v3 subset these documents used, so validation results did not change:
 * - `obj` strips unknown keys unless `passthrough` (keeps them) or `strict` (refuses them); a missing or `undefined`
 *   field is `Required` unless `opt` or `dflt` (which supplies a fresh default);
 * - checks run in declaration order and the first failure is reported as one issue `{ path, message }`, with zod's
 *   message wording for the checks used (`Required`, `Invalid enum value. Expected 'a' | 'b', received 'c'`, …).
 * `safeParse` never throws; `parse` throws `ValidationError` (no document content in its message).
 */
export interface Issue {
  path: Array<string | number>;
  message: string;
}

/** An issue's place as a JSON path (`$.providers.x.models[0]`): the document's keys, never its values. */
export function issuePath(path: ReadonlyArray<string | number>): string {
  return "$" + path.map((p) => (typeof p === "number" ? `[${p}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`)).join("");
}

export type SafeParse<T> = { success: true; data: T } | { success: false; error: { issues: Issue[] } };

/** Internal: unwinds a check at its first failure (caught by `safeParse`). */
class Fail extends Error {
  constructor(readonly issue: Issue) {
    super("invalid");
  }
}

export class ValidationError extends Error {
  constructor(readonly issues: Issue[]) {
    super("document is invalid");
    this.name = "ValidationError";
  }
}

type Check = (v: unknown, path: Array<string | number>) => unknown;

export class V<T> {
  constructor(readonly check: Check) {}

  safeParse(v: unknown): SafeParse<T> {
    try {
      return { success: true, data: this.check(v, []) as T };
    } catch (e) {
      if (e instanceof Fail) return { success: false, error: { issues: [e.issue] } };
      throw e;
    }
  }

  parse(v: unknown): T {
    const r = this.safeParse(v);
    if (!r.success) throw new ValidationError(r.error.issues);
    return r.data;
  }

  /** A further condition on a valid value, failing with `message`. */
  refine(ok: (v: T) => boolean, message: string): V<T> {
    return new V<T>((v, path) => {
      const out = this.check(v, path) as T;
      if (!ok(out)) fail(path, message);
      return out;
    });
  }
}

function fail(path: Array<string | number>, message: string): never {
  throw new Fail({ path: [...path], message });
}

function typeName(v: unknown): string {
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isNaN(v) ? "nan" : "number";
  return typeof v;
}

function expect(v: unknown, path: Array<string | number>, type: string): never {
  if (v === undefined) fail(path, "Required");
  fail(path, `Expected ${type}, received ${typeName(v)}`);
}

export interface StrOpts {
  min?: number;
  max?: number;
  regex?: RegExp;
  url?: boolean;
}

export function str(o: StrOpts = {}): V<string> {
  return new V<string>((v, path) => {
    if (typeof v !== "string") expect(v, path, "string");
    if (o.min !== undefined && v.length < o.min) fail(path, `String must contain at least ${o.min} character(s)`);
    if (o.max !== undefined && v.length > o.max) fail(path, `String must contain at most ${o.max} character(s)`);
    if (o.regex !== undefined && !o.regex.test(v)) fail(path, "Invalid");
    if (o.url === true) {
      try {
        new URL(v);
      } catch {
        fail(path, "Invalid url");
      }
    }
    return v;
  });
}

export interface NumOpts {
  int?: boolean;
  positive?: boolean;
  nonnegative?: boolean;
  min?: number;
  max?: number;
}

export function num(o: NumOpts = {}): V<number> {
  return new V<number>((v, path) => {
    if (typeof v !== "number" || Number.isNaN(v)) expect(v, path, "number");
    if (o.int === true && !Number.isInteger(v)) fail(path, "Expected integer, received float");
    if (o.positive === true && !(v > 0)) fail(path, "Number must be greater than 0");
    if (o.nonnegative === true && !(v >= 0)) fail(path, "Number must be greater than or equal to 0");
    if (o.min !== undefined && v < o.min) fail(path, `Number must be greater than or equal to ${o.min}`);
    if (o.max !== undefined && v > o.max) fail(path, `Number must be less than or equal to ${o.max}`);
    return v;
  });
}

export const bool = (): V<boolean> =>
  new V<boolean>((v, path) => {
    if (typeof v !== "boolean") expect(v, path, "boolean");
    return v;
  });

export const unknownValue = (): V<unknown> => new V<unknown>((v) => v);

export function oneOf<const E extends readonly string[]>(values: E): V<E[number]> {
  const list = values.map((x) => `'${x}'`).join(" | ");
  return new V<E[number]>((v, path) => {
    if (typeof v === "string" && values.includes(v)) return v;
    if (v === undefined) fail(path, "Required");
    if (typeof v !== "string") fail(path, `Expected ${list}, received ${typeName(v)}`);
    fail(path, `Invalid enum value. Expected ${list}, received '${v}'`);
  });
}

export function lit<const L extends string | number>(value: L): V<L> {
  return new V<L>((v, path) => {
    if (v === value) return v;
    if (v === undefined) fail(path, "Required");
    fail(path, `Invalid literal value, expected ${JSON.stringify(value)}`);
  });
}

export function nullable<T>(inner: V<T>): V<T | null> {
  return new V<T | null>((v, path) => (v === null ? null : inner.check(v, path)));
}

export function arr<T>(item: V<T>, o: { max?: number } = {}): V<T[]> {
  return new V<T[]>((v, path) => {
    if (!Array.isArray(v)) expect(v, path, "array");
    if (o.max !== undefined && v.length > o.max) fail(path, `Array must contain at most ${o.max} element(s)`);
    return v.map((x, i) => item.check(x, [...path, i]) as T);
  });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function rec<T>(value: V<T>): V<Record<string, T>> {
  return new V<Record<string, T>>((v, path) => {
    if (!isPlainObject(v)) expect(v, path, "object");
    const out: Record<string, T> = {};
    for (const [k, x] of Object.entries(v)) {
      const r = value.check(x, [...path, k]) as T;
      // Like zod: `__proto__` as a data key stays a data key.
      Object.defineProperty(out, k, { value: r, enumerable: true, writable: true, configurable: true });
    }
    return out;
  });
}

/** A field: required (a bare `V`), optional, or defaulted when missing. */
interface Field {
  v: V<unknown>;
  mode: "required" | "optional" | "default";
  dflt?: () => unknown;
}

export const opt = <T>(v: V<T>): V<T | undefined> & { field: Field } => Object.assign(new V<T | undefined>(v.check), { field: { v, mode: "optional" as const } });
export const dflt = <T>(v: V<T>, make: () => T): V<T> & { field: Field } => Object.assign(new V<T>(v.check), { field: { v, mode: "default" as const, dflt: make } });

export function obj<T>(shape: Record<string, V<unknown>>, unknownKeys: "strip" | "passthrough" | "strict" = "strip"): V<T> {
  const fields = Object.entries(shape).map(([k, v]) => [k, (v as { field?: Field }).field ?? { v, mode: "required" }] as const);
  return new V<T>((v, path) => {
    if (!isPlainObject(v)) expect(v, path, "object");
    const out: Record<string, unknown> = {};
    for (const [k, f] of fields) {
      const x = Object.prototype.hasOwnProperty.call(v, k) ? v[k] : undefined;
      if (x === undefined) {
        if (f.mode === "optional") continue;
        if (f.mode === "default") {
          out[k] = f.v.check(f.dflt!(), [...path, k]);
          continue;
        }
      }
      out[k] = f.v.check(x, [...path, k]);
    }
    const extra = Object.keys(v).filter((k) => !(k in shape) || !Object.prototype.hasOwnProperty.call(shape, k));
    if (unknownKeys === "strict" && extra.length > 0) fail(path, `Unrecognized key(s) in object: ${extra.map((k) => `'${k}'`).join(", ")}`);
    if (unknownKeys === "passthrough") for (const k of extra) Object.defineProperty(out, k, { value: v[k], enumerable: true, writable: true, configurable: true });
    return out;
  });
}
