/**
 * A built-in tool whose implementation loads on its first call: the spec (name, description, JSON Schema), risk and
 * argument validation come from its definition (specs.ts) at once, so listing tools and building a provider request
 * load no tool code. The first `run` imports the implementation (later calls reuse it); a failed import is a
 * `failed` result naming the cause, and the next call tries again. `run` never rejects.
 */
import { parse } from "../../core/arg-schema.js";
import type { Tool } from "../types.js";
import { formatIssues, toModelSchema } from "./define.js";
import { describeError, fail } from "./result.js";
import type { ToolDef } from "./specs.js";

export function lazyTool<T extends Record<string, unknown>>(def: ToolDef<T>, load: () => Promise<Tool>, autoApprove?: Tool["autoApprove"]): Tool {
  let loading: Promise<Tool> | null = null;
  const impl = (): Promise<Tool> => {
    if (loading === null) {
      loading = load();
      loading.catch(() => (loading = null));
    }
    return loading;
  };
  return {
    spec: { name: def.name, description: def.description, inputSchema: toModelSchema(def.schema) },
    risk: def.risk,
    transport: "local",
    validate(args) {
      const r = parse(def.schema, args);
      return r.ok ? { ok: true, value: r.value } : { ok: false, message: formatIssues(r.issues) };
    },
    ...(autoApprove !== undefined ? { autoApprove } : {}),
    async run(args, ctx) {
      let tool: Tool;
      try {
        tool = await impl();
      } catch (err) {
        return fail("failed", `${def.name}: the tool could not be loaded (${describeError(err)})`);
      }
      return tool.run(args, ctx);
    },
  };
}
