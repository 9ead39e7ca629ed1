/**
 * Builds a local `Tool` from an argument schema (src/core/arg-schema.ts): the schema is the single source of the
 * argument type, the validation, and the JSON Schema advertised to models.
 */
import { parse, type ArgSchema } from "../../core/arg-schema.js";
import type { Tool, ToolContext, ToolResult, ToolRisk } from "../types.js";
import { boundText, describeError, fail } from "./result.js";

/** Longest validation message handed back to the model. */
const MAX_VALIDATION_MESSAGE_BYTES = 2048;

export interface LocalToolDef<T extends Record<string, unknown>> {
  name: string;
  description: string;
  /** What running it can affect (the approval policy's input). */
  risk: ToolRisk;
  schema: ArgSchema<T>;
  /**
   * Runs with already-validated arguments. May throw: the wrapper turns a throw into a `failed`
   * result (or `cancelled` when the signal fired), so `Tool.run` never rejects.
   */
  execute(args: T, ctx: ToolContext): Promise<ToolResult>;
}

/** One deeply frozen copy per argument schema: tools built again every turn share it (and its cached encoding). */
const modelSchemas = new WeakMap<ArgSchema<unknown>, Record<string, unknown>>();

/**
 * Freezes a JSON value deeply, in place. An argument schema's JSON is built once by its builders (src/core/arg-schema.ts)
 * and never written after, so it is frozen itself rather than copied first: a `structuredClone` of every tool's schema
 * then a freezing walk of the copy cost a fresh process's first turn about twice as much (docs/runtime.md).
 */
function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** JSON Schema for the model: `schema.json`, deeply frozen (the same object for every call with one `schema`). */
export function toModelSchema(schema: ArgSchema<unknown>): Record<string, unknown> {
  let s = modelSchemas.get(schema);
  if (s === undefined) modelSchemas.set(schema, (s = deepFreeze(schema.json)));
  return s;
}

/** The validation message handed back to the model (bounded). */
export function formatIssues(issues: string[]): string {
  return boundText(issues.join("\n"), MAX_VALIDATION_MESSAGE_BYTES);
}

export function defineLocalTool<T extends Record<string, unknown>>(def: LocalToolDef<T>): Tool {
  const spec = { name: def.name, description: def.description, inputSchema: toModelSchema(def.schema) };
  const validate: Tool["validate"] = (args) => {
    const r = parse(def.schema, args);
    return r.ok ? { ok: true, value: r.value } : { ok: false, message: formatIssues(r.issues) };
  };
  return {
    spec,
    risk: def.risk,
    transport: "local",
    validate,
    async run(args, ctx) {
      if (ctx.signal.aborted) return fail("cancelled", `${def.name}: cancelled before start`);
      // Re-validated here so a caller that skipped `validate` still cannot run bad arguments.
      const parsed = parse(def.schema, args);
      if (!parsed.ok) return fail("invalid_arguments", `${def.name}: invalid arguments\n${formatIssues(parsed.issues)}`);
      try {
        const res = await def.execute(parsed.value, ctx);
        return { ...res, content: boundText(res.content) };
      } catch (err) {
        if (ctx.signal.aborted) return fail("cancelled", `${def.name}: cancelled`);
        return fail("failed", `${def.name}: ${describeError(err)}`);
      }
    },
  };
}
