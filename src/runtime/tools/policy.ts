/**
 * Builds the `ToolPolicy` a session's tools run under from the global settings' `tools` section, Berth's state
 * root, and a door's override. Defaults (no settings): files confined to the workspace, bash unsandboxed, the
 * state root protected. A door with an approval channel may pass `override` to loosen or tighten it.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { ToolSettings } from "../../store/settings/schema.js";
import type { Tool } from "../types.js";
import type { ToolPolicy } from "./confine.js";

export function toolPolicyFromSettings(s: ToolSettings | undefined, stateRoot: string, override?: Partial<ToolPolicy>): ToolPolicy {
  const home = homedir();
  const extraRoots = (s?.allowed_dirs ?? []).map((d) => (d.startsWith("~/") ? join(home, d.slice(2)) : resolve(d)));
  const base: ToolPolicy = {
    files: { confine: s?.file_access !== "unrestricted", extraRoots, protectedRoots: [resolve(stateRoot)] },
    sandbox: s?.sandbox ?? "none",
  };
  if (override === undefined) return base;
  const files = override.files ?? base.files;
  // The state root stays protected whatever a door asks for.
  const protectedRoots = [...new Set([...base.files.protectedRoots, ...files.protectedRoots])];
  return { files: { ...files, protectedRoots }, sandbox: override.sandbox ?? base.sandbox };
}

/** The tool with `policy` handed to every call whose context does not carry one. */
export function withPolicy(tool: Tool, policy: ToolPolicy): Tool {
  // Every metadata field (risk, transport, serverName, …) is carried over; only `run` changes.
  return {
    ...tool,
    validate: (args) => tool.validate(args),
    run: (args, ctx) => tool.run(args, "policy" in ctx ? ctx : { ...ctx, policy }),
  };
}
