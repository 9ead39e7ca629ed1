/**
 * Hand-written consumer validators (no zod: `berth chat -p` should not pay its import cost on every start).
 * Contract: every reader either returns a value of exactly the documented JSON type and range or throws
 * `DecodeError`. Readers never default a missing required field, never coerce ("1" is not 1, 0 is not false),
 * and look only at the members they are asked for, so unknown members of an object are tolerated.
 */
import { isPlainObject } from "../../core/json-bounds.js";
import { utf8Length } from "../../core/utf8.js";

/** A received message violates the wire contract. The message names the field, never its value. */
export class DecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DecodeError";
  }
}

export type Obj = Record<string, unknown>;

export function fail(message: string): never {
  throw new DecodeError(message);
}

export function obj(v: unknown, what: string): Obj {
  if (!isPlainObject(v)) fail(`${what} must be an object`);
  return v;
}

/** `has` distinguishes absent (optional) from present-as-null (nullable): they are never interchangeable here. */
export function has(o: Obj, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

function need(o: Obj, k: string, what: string): unknown {
  if (!has(o, k)) fail(`${what}.${k} is required`);
  return o[k];
}

export interface StrRule {
  maxBytes: number;
  /** Empty strings allowed (default false). */
  empty?: boolean;
}

export function str(o: Obj, k: string, what: string, rule: StrRule): string {
  const v = need(o, k, what);
  return strValue(v, `${what}.${k}`, rule);
}

export function strValue(v: unknown, what: string, rule: StrRule): string {
  if (typeof v !== "string") fail(`${what} must be a string`);
  if (v.length === 0 && rule.empty !== true) fail(`${what} must be nonempty`);
  if (v.length > rule.maxBytes && utf8Length(v) > rule.maxBytes) fail(`${what} exceeds its byte bound`);
  return v;
}

export function nullableStr(o: Obj, k: string, what: string, rule: StrRule): string | null {
  const v = need(o, k, what);
  return v === null ? null : strValue(v, `${what}.${k}`, rule);
}

export function bool(o: Obj, k: string, what: string): boolean {
  const v = need(o, k, what);
  if (typeof v !== "boolean") fail(`${what}.${k} must be a boolean`);
  return v;
}

/** Required literal value (e.g. `status:"accepted"`, `environment_unchanged:true`). */
export function literal<T extends string | boolean | number>(o: Obj, k: string, what: string, value: T): T {
  const v = need(o, k, what);
  if (v !== value) fail(`${what}.${k} has an unsupported value`);
  return value;
}

/** Nonnegative integer within the locally representable (safe integer) range. */
export function countValue(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) fail(`${what} must be a nonnegative integer`);
  return v;
}

export function count(o: Obj, k: string, what: string): number {
  return countValue(need(o, k, what), `${what}.${k}`);
}

export function nullableCount(o: Obj, k: string, what: string): number | null {
  const v = need(o, k, what);
  return v === null ? null : countValue(v, `${what}.${k}`);
}

/** A semantic enum: values outside `allowed` are rejected, never mapped to a fallback. */
export function oneOf<T extends string>(o: Obj, k: string, what: string, allowed: readonly T[]): T {
  const v = need(o, k, what);
  return enumValue(v, `${what}.${k}`, allowed);
}

export function enumValue<T extends string>(v: unknown, what: string, allowed: readonly T[]): T {
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) fail(`${what} has an unsupported value`);
  return v as T;
}

export function arr(o: Obj, k: string, what: string, maxItems: number): unknown[] {
  const v = need(o, k, what);
  if (!Array.isArray(v)) fail(`${what}.${k} must be an array`);
  if (v.length > maxItems) fail(`${what}.${k} has too many items`);
  return v;
}

/** RFC 3339 date-time (`2024-01-02T03:04:05Z`, fractional seconds and offsets allowed). */
export function timestamp(o: Obj, k: string, what: string): string {
  const v = str(o, k, what, { maxBytes: 64 });
  if (!/^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(v) || Number.isNaN(Date.parse(v)))
    fail(`${what}.${k} must be an RFC 3339 timestamp`);
  return v;
}
