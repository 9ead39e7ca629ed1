/**
 * Bounded JSON validation: one walk over a decoded value checking nesting depth, array items,
 * object fields, and string/key UTF-8 bytes. Returns an outcome; never throws.
 * The walk is iterative so hostile nesting cannot exhaust the stack.
 */
/** A decoded JSON object (the one name for it across layers). */
export type Json = Record<string, unknown>;

/** Bounds of a bounded JSON walk (each protocol picks its own numbers). */
export interface JsonBounds {
  maxDepth: number;
  maxArrayItems: number;
  maxObjectFields: number;
  maxStringBytes: number;
}
import { utf8Length } from "./utf8.js";

export type BoundsViolation = "depth" | "array_items" | "object_fields" | "string_bytes" | "key_bytes";

export function checkJsonBounds(value: unknown, b: JsonBounds): BoundsViolation | null {
  // Depth counts containers: a bare scalar is depth 0, `{}` is depth 1.
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v === "string") {
      if (v.length * 3 > b.maxStringBytes && utf8Length(v) > b.maxStringBytes) return "string_bytes";
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    const depth = d + 1;
    if (depth > b.maxDepth) return "depth";
    if (Array.isArray(v)) {
      if (v.length > b.maxArrayItems) return "array_items";
      for (const item of v) stack.push([item, depth]);
    } else {
      const keys = Object.keys(v);
      if (keys.length > b.maxObjectFields) return "object_fields";
      for (const k of keys) {
        if (k.length * 3 > b.maxStringBytes && utf8Length(k) > b.maxStringBytes) return "key_bytes";
        stack.push([(v as Record<string, unknown>)[k], depth]);
      }
    }
  }
  return null;
}

/** Compact JSON UTF-8 byte length (what `JSON.stringify` would produce). */
export function compactJsonBytes(value: unknown): number {
  return utf8Length(JSON.stringify(value) ?? "");
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
