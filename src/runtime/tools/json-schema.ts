/**
 * A small, bounded JSON-Schema subset validator for MCP tool arguments (server-provided
 * `inputSchema`). Checked keywords: `type` (string or list), `required`, `properties`,
 * `additionalProperties` (false or a schema), `enum`, `const`, `items` (one schema). Every other
 * keyword (`$ref`, `anyOf`, formats, ranges, …) is accepted without checking: the server
 * validates again, this pass only refuses calls that are certainly wrong before they are sent.
 * Bounds: depth ≤ 64 and ≤ 20,000 visited nodes (beyond them the value is refused), at most
 * 10 reported errors.
 * `schemaFits` bounds a schema itself before its tool is offered (it is sent with every turn's request).
 */
import { checkJsonBounds, compactJsonBytes } from "../../core/json-bounds.js";

const MAX_DEPTH = 64;
const MAX_NODES = 20_000;
const MAX_ERRORS = 10;

type Json = unknown;

interface Walk {
  errors: string[];
  nodes: number;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function typeOf(v: Json): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function matchesType(v: Json, t: string): boolean {
  switch (t) {
    case "integer":
      return typeof v === "number" && Number.isInteger(v);
    case "number":
      return typeof v === "number" && Number.isFinite(v);
    case "object":
      return isObject(v);
    default:
      return typeOf(v) === t;
  }
}

function deepEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

function walk(schema: unknown, v: Json, path: string, depth: number, w: Walk): void {
  if (w.errors.length >= MAX_ERRORS) return;
  if (++w.nodes > MAX_NODES || depth > MAX_DEPTH) {
    if (!w.errors.some((e) => e.startsWith("(arguments)"))) w.errors.push("(arguments): too large or too deeply nested to validate");
    return;
  }
  if (schema === false) {
    w.errors.push(`${path}: not allowed`);
    return;
  }
  if (!isObject(schema)) return; // `true` or malformed: accept
  const at = path === "" ? "(arguments)" : path;
  const t = schema.type;
  if (typeof t === "string" || Array.isArray(t)) {
    const types = (Array.isArray(t) ? t : [t]).filter((x): x is string => typeof x === "string");
    if (types.length > 0 && !types.some((x) => matchesType(v, x))) {
      w.errors.push(`${at}: expected ${types.join(" or ")}, got ${typeOf(v)}`);
      return;
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => deepEqual(e, v))) {
    w.errors.push(`${at}: must be one of ${JSON.stringify(schema.enum).slice(0, 200)}`);
  }
  if (Object.hasOwn(schema, "const") && !deepEqual(schema.const, v)) {
    w.errors.push(`${at}: must equal ${JSON.stringify(schema.const).slice(0, 200)}`);
  }
  if (isObject(v)) {
    const props = isObject(schema.properties) ? schema.properties : {};
    if (Array.isArray(schema.required)) {
      for (const r of schema.required) {
        if (typeof r === "string" && !Object.hasOwn(v, r)) w.errors.push(`${path === "" ? "" : `${path}.`}${r}: required`);
      }
    }
    for (const [k, child] of Object.entries(v)) {
      const sub = `${path === "" ? "" : `${path}.`}${k}`;
      if (Object.hasOwn(props, k)) walk(props[k], child, sub, depth + 1, w);
      else if (schema.additionalProperties === false) w.errors.push(`${sub}: unknown property`);
      else if (isObject(schema.additionalProperties)) walk(schema.additionalProperties, child, sub, depth + 1, w);
      if (w.errors.length >= MAX_ERRORS) return;
    }
  } else if (Array.isArray(v) && isObject(schema.items)) {
    for (let i = 0; i < v.length && w.errors.length < MAX_ERRORS; i++) walk(schema.items, v[i], `${path}[${i}]`, depth + 1, w);
  }
}

/** Validates `value` against the subset described above; `errors` is empty when it passes. */
export function validateJsonSchema(schema: unknown, value: unknown): string[] {
  const w: Walk = { errors: [], nodes: 0 };
  walk(schema, value, "", 0, w);
  return w.errors;
}

/** A tool's input schema nests at most this many objects and arrays (`{}` is one level)... */
export const MAX_SCHEMA_DEPTH = 64;
/** ...and is at most this many bytes of JSON (UTF-8). */
export const MAX_SCHEMA_BYTES = 64 * 1024;

/**
 * Whether a server's input schema is within both bounds. The depth is measured first, by core's iterative walk, so a
 * schema nested thousands deep (which overflows the stack of `JSON.stringify`, and with it every request that carries
 * the tool) is refused before it is serialized to be measured.
 */
export function schemaFits(schema: unknown): boolean {
  const depthOnly = { maxDepth: MAX_SCHEMA_DEPTH, maxArrayItems: Infinity, maxObjectFields: Infinity, maxStringBytes: Infinity };
  return checkJsonBounds(schema, depthOnly) === null && compactJsonBytes(schema) <= MAX_SCHEMA_BYTES;
}
