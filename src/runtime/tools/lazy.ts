/**
 * A built-in tool whose implementation loads on its first call: the spec (name, description, JSON Schema), risk and
 * argument validation come from its definition (specs.ts) at once, so listing tools and building a provider request
 * load no tool code. The first `run` imports the implementation (later calls reuse it, concurrent first calls share
 * one import); a failed import is a `failed` result naming the cause, and the next call tries again. A call whose
 * signal fires while the code loads ends `cancelled` at once (the import goes on for later calls) and never runs.
 * `run` never rejects.
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
      if (ctx.signal.aborted) return fail("cancelled", `${def.name}: cancelled before start`);
      let tool: Tool | null;
      try {
        tool = await unlessAborted(impl(), ctx.signal);
      } catch (err) {
        return fail("failed", `${def.name}: the tool could not be loaded (${describeError(err)})`);
      }
      if (tool === null || ctx.signal.aborted) return fail("cancelled", `${def.name}: cancelled while its code loaded`);
      return tool.run(args, ctx);
    },
  };
}

/** `p`'s outcome, or null as soon as `signal` fires (whichever comes first). */
function unlessAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T | null> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(null);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
