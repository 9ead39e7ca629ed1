/**
 * A small schema builder for flat tool-argument objects: one definition gives the TypeScript type, the
 * validation, and the JSON Schema advertised to models. Built for cold-start cost (no schema library on the
 * turn path) and for the subset tools need: strings, string enums, numbers/integers, booleans, optional fields,
 * bounded arrays and strict objects. Validation never throws; it returns the parsed value or `path: message` issues.
 */

export interface ArgSchema<T> {
  readonly json: Record<string, unknown>;
  readonly optional: boolean;
  /** Returns the value, or pushes issues and returns `INVALID`. */
  check(value: unknown, path: string, issues: string[]): T | typeof INVALID;
}

export const INVALID: unique symbol = Symbol("invalid");

export type Infer<S> = S extends ArgSchema<infer T> ? T : never;

interface Common {
  description?: string;
}

function describe(json: Record<string, unknown>, c: Common): Record<string, unknown> {
  return c.description === undefined ? json : { ...json, description: c.description };
}

export function string(opts: Common & { min?: number; max?: number } = {}): ArgSchema<string> {
  const json: Record<string, unknown> = { type: "string" };
  if (opts.min !== undefined) json.minLength = opts.min;
  if (opts.max !== undefined) json.maxLength = opts.max;
  return {
    json: describe(json, opts),
    optional: false,
    check(v, path, issues) {
      if (typeof v !== "string") return issue(issues, path, "expected string");
      if (opts.min !== undefined && v.length < opts.min) return issue(issues, path, `must be at least ${opts.min} characters`);
      if (opts.max !== undefined && v.length > opts.max) return issue(issues, path, `must be at most ${opts.max} characters`);
      return v;
    },
  };
}

/** A finite number; `integer: true` also requires an integer. `exclusiveMin` is for "positive". */
export function number(opts: Common & { integer?: boolean; min?: number; max?: number; exclusiveMin?: number } = {}): ArgSchema<number> {
  const json: Record<string, unknown> = { type: opts.integer === true ? "integer" : "number" };
  if (opts.min !== undefined) json.minimum = opts.min;
  if (opts.exclusiveMin !== undefined) json.exclusiveMinimum = opts.exclusiveMin;
  if (opts.max !== undefined) json.maximum = opts.max;
  return {
    json: describe(json, opts),
    optional: false,
    check(v, path, issues) {
      if (typeof v !== "number" || !Number.isFinite(v)) return issue(issues, path, "expected number");
      if (opts.integer === true && !Number.isInteger(v)) return issue(issues, path, "expected integer");
      if (opts.min !== undefined && v < opts.min) return issue(issues, path, `must be >= ${opts.min}`);
      if (opts.exclusiveMin !== undefined && v <= opts.exclusiveMin) return issue(issues, path, `must be > ${opts.exclusiveMin}`);
      if (opts.max !== undefined && v > opts.max) return issue(issues, path, `must be <= ${opts.max}`);
      return v;
    },
  };
}

export function boolean(opts: Common = {}): ArgSchema<boolean> {
  return {
    json: describe({ type: "boolean" }, opts),
    optional: false,
    check: (v, path, issues) => (typeof v === "boolean" ? v : issue(issues, path, "expected boolean")),
  };
}

/** One of a fixed set of strings. */
export function literal<const V extends string>(values: readonly V[], opts: Common = {}): ArgSchema<V> {
  return {
    json: describe({ type: "string", enum: [...values] }, opts),
    optional: false,
    check: (v, path, issues) =>
      typeof v === "string" && (values as readonly string[]).includes(v) ? (v as V) : issue(issues, path, `must be one of ${values.join(", ")}`),
  };
}

/** An array of `items`, at most `max` long (each element checked, issues at `path[i]`). */
export function array<T>(items: ArgSchema<T>, opts: Common & { max?: number } = {}): ArgSchema<T[]> {
  const json: Record<string, unknown> = { type: "array", items: items.json };
  if (opts.max !== undefined) json.maxItems = opts.max;
  return {
    json: describe(json, opts),
    optional: false,
    check(v, path, issues) {
      if (!Array.isArray(v)) return issue(issues, path, "expected array");
      if (opts.max !== undefined && v.length > opts.max) return issue(issues, path, `must have at most ${opts.max} entries`);
      const out: T[] = [];
      let bad = false;
      v.forEach((el, i) => {
        const r = items.check(el, `${path === "" ? "(arguments)" : path}[${i}]`, issues);
        if (r === INVALID) bad = true;
        else out.push(r);
      });
      return bad ? INVALID : out;
    },
  };
}

export function optional<T>(s: ArgSchema<T>): ArgSchema<T | undefined> {
  return { json: s.json, optional: true, check: (v, path, issues) => (v === undefined ? undefined : s.check(v, path, issues)) };
}

type Shape = Record<string, ArgSchema<unknown>>;
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K]["optional"] extends true ? K : undefined extends Infer<S[K]> ? K : never }[keyof S];
type RequiredKeys<S extends Shape> = Exclude<keyof S, OptionalKeys<S>>;
export type ObjectOf<S extends Shape> = { [K in RequiredKeys<S>]: Infer<S[K]> } & { [K in OptionalKeys<S>]?: Exclude<Infer<S[K]>, undefined> };

/** A strict object: unknown fields are rejected (`additionalProperties: false`). */
export function object<S extends Shape>(shape: S, opts: Common = {}): ArgSchema<ObjectOf<S>> {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const [k, s] of Object.entries(shape)) {
    properties[k] = s.json;
    if (!s.optional) required.push(k);
  }
  const json: Record<string, unknown> = { type: "object", properties, additionalProperties: false };
  if (required.length > 0) json.required = required;
  return {
    json: describe(json, opts),
    optional: false,
    check(v, path, issues) {
      if (typeof v !== "object" || v === null || Array.isArray(v)) return issue(issues, path, "expected object");
      const o = v as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      let bad = false;
      for (const k of Object.keys(o)) if (!(k in shape)) bad = issue(issues, join(path, k), "unknown field") === INVALID;
      for (const [k, s] of Object.entries(shape)) {
        const r = s.check(o[k], join(path, k), issues);
        if (r === INVALID) bad = true;
        else if (r !== undefined) out[k] = r;
      }
      return bad ? INVALID : (out as ObjectOf<S>);
    },
  };
}

export function parse<T>(s: ArgSchema<T>, value: unknown): { ok: true; value: T } | { ok: false; issues: string[] } {
  const issues: string[] = [];
  const r = s.check(value, "", issues);
  return r === INVALID ? { ok: false, issues } : { ok: true, value: r };
}

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function issue(issues: string[], path: string, message: string): typeof INVALID {
  issues.push(`${path === "" ? "(arguments)" : path}: ${message}`);
  return INVALID;
}
