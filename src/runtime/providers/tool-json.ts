/**
 * Tool definitions encoded once per tool, not once per request: a request of a tool-enabled turn carries every tool's
 * JSON Schema, and encoding them again for every request (and every estimate) is the bulk of building one.
 *
 * Contract: a `ToolSpec` is immutable once offered (tools are built once per registry and shared by its turns), so
 * its encoding is kept per spec object and per wire format, for as long as the spec lives (a WeakMap). A spec whose
 * schema object is frozen (tools/define.ts shares one per argument schema) also finds the encoding of an earlier
 * spec with the same schema object, name and description.
 */
import type { ToolSpec } from "../types.js";

const encoded = new WeakMap<ToolSpec, Map<string, string>>();
/**
 * The same, for specs built again every turn around one shared (frozen) schema object (tools/define.ts): keyed by
 * the schema object, then by wire, name and description.
 */
const bySchema = new WeakMap<object, Map<string, string>>();

/** `spec`'s definition in wire format `wire` (`encode` builds its JSON value the first time), as JSON text. */
export function toolJson(spec: ToolSpec, wire: string, encode: (t: ToolSpec) => unknown): string {
  let byWire = encoded.get(spec);
  if (byWire === undefined) encoded.set(spec, (byWire = new Map<string, string>()));
  let s = byWire.get(wire);
  if (s !== undefined) return s;
  if (Object.isFrozen(spec.inputSchema)) {
    let m = bySchema.get(spec.inputSchema);
    if (m === undefined) bySchema.set(spec.inputSchema, (m = new Map<string, string>()));
    const key = `${wire}\0${spec.name}\0${spec.description}`;
    s = m.get(key);
    if (s === undefined) m.set(key, (s = JSON.stringify(encode(spec))));
  } else s = JSON.stringify(encode(spec));
  byWire.set(wire, s);
  return s;
}

/** The JSON text of `body` (a plain object) with `"tools": [...]` (each tool's cached encoding) as its last member. */
export function stringifyWithTools(body: Record<string, unknown>, tools: readonly ToolSpec[], wire: string, encode: (t: ToolSpec) => unknown): string {
  const head = JSON.stringify(body);
  if (tools.length === 0) return head;
  let list = "";
  for (const t of tools) list += (list === "" ? "" : ",") + toolJson(t, wire, encode);
  return `${head.slice(0, -1)}${head.length > 2 ? "," : ""}"tools":[${list}]}`;
}

/** Characters of a tool's schema as the context estimate counts them (its JSON length), kept per spec. */
const schemaChars = new WeakMap<ToolSpec, number>();

const schemaCharsOf = new WeakMap<object, number>();

export function toolSchemaChars(spec: ToolSpec): number {
  let n = schemaChars.get(spec);
  if (n !== undefined) return n;
  const schema = spec.inputSchema;
  // A frozen schema cannot change: its length is kept per schema object too (specs built again every turn).
  n = Object.isFrozen(schema) ? schemaCharsOf.get(schema) : undefined;
  if (n === undefined) {
    n = JSON.stringify(schema).length;
    if (Object.isFrozen(schema)) schemaCharsOf.set(schema, n);
  }
  schemaChars.set(spec, n);
  return n;
}
