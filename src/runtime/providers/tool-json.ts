/**
 * Tool definitions encoded once per tool, not once per request: a request of a tool-enabled turn carries every tool's
 * JSON Schema, and encoding them again for every request (and every estimate) is the bulk of building one.
 *
 * Contract: a `ToolSpec` is immutable once offered (tools are built once per registry and shared by its turns), so
 * its encoding is kept per spec object and per wire format, for as long as the spec lives (a WeakMap).
 */
import type { ToolSpec } from "../types.js";

const encoded = new WeakMap<ToolSpec, Map<string, string>>();

/** `spec`'s definition in wire format `wire` (`encode` builds its JSON value the first time), as JSON text. */
export function toolJson(spec: ToolSpec, wire: string, encode: (t: ToolSpec) => unknown): string {
  let byWire = encoded.get(spec);
  if (byWire === undefined) encoded.set(spec, (byWire = new Map<string, string>()));
  let s = byWire.get(wire);
  if (s === undefined) byWire.set(wire, (s = JSON.stringify(encode(spec))));
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

export function toolSchemaChars(spec: ToolSpec): number {
  let n = schemaChars.get(spec);
  if (n === undefined) schemaChars.set(spec, (n = JSON.stringify(spec.inputSchema).length));
  return n;
}
