/**
 * Builds a local `Tool` from a zod schema: the schema is the single source of the argument type,
 * the validation, and the JSON Schema advertised to models (`z.toJSONSchema`).
 */
import { z } from "zod";
import type { Tool, ToolContext, ToolResult } from "../types.js";
import { boundText, describeError, fail } from "./result.js";

/** Longest validation message handed back to the model. */
const MAX_VALIDATION_MESSAGE_BYTES = 2048;

export interface LocalToolDef<S extends z.ZodType<Record<string, unknown>>> {
  name: string;
  description: string;
  schema: S;
  /**
   * Runs with already-validated arguments. May throw: the wrapper turns a throw into a `failed`
   * result (or `cancelled` when the signal fired), so `Tool.run` never rejects.
   */
  execute(args: z.output<S>, ctx: ToolContext): Promise<ToolResult>;
}

/** JSON Schema for the model: the input side of `schema`, without the `$schema` marker. */
export function toModelSchema(schema: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}

/** Formats a zod error as `path: message` lines, bounded. */
export function formatZodError(err: z.ZodError): string {
  const lines = err.issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "(arguments)"}: ${i.message}`);
  return boundText(lines.join("\n"), MAX_VALIDATION_MESSAGE_BYTES);
}

export function defineLocalTool<S extends z.ZodType<Record<string, unknown>>>(def: LocalToolDef<S>): Tool {
  const spec = { name: def.name, description: def.description, inputSchema: toModelSchema(def.schema) };
  const validate: Tool["validate"] = (args) => {
    const r = def.schema.safeParse(args);
    return r.success ? { ok: true, value: r.data } : { ok: false, message: formatZodError(r.error) };
  };
  return {
    spec,
    transport: "local",
    validate,
    async run(args, ctx) {
      if (ctx.signal.aborted) return fail("cancelled", `${def.name}: cancelled before start`);
      // Re-validated here so a caller that skipped `validate` still cannot run bad arguments.
      const parsed = def.schema.safeParse(args);
      if (!parsed.success) return fail("invalid_arguments", `${def.name}: invalid arguments\n${formatZodError(parsed.error)}`);
      try {
        const res = await def.execute(parsed.data, ctx);
        return { ...res, content: boundText(res.content) };
      } catch (err) {
        if (ctx.signal.aborted) return fail("cancelled", `${def.name}: cancelled`);
        return fail("failed", `${def.name}: ${describeError(err)}`);
      }
    },
  };
}
