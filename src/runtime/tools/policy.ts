/**
 * Builds the `ToolPolicy` a session's tools run under from the global settings' `tools` section and Berth's state
 * root. Defaults (no settings): files confined to the workspace, bash unsandboxed, the state root protected.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { ToolSettings } from "../../store/settings/schema.js";
import type { Tool } from "../types.js";
import type { ToolPolicy } from "./confine.js";

export function toolPolicyFromSettings(s: ToolSettings | undefined, stateRoot: string): ToolPolicy {
  const home = homedir();
  const extraRoots = (s?.allowed_dirs ?? []).map((d) => (d.startsWith("~/") ? join(home, d.slice(2)) : resolve(d)));
  return {
    files: { confine: s?.file_access !== "unrestricted", extraRoots, protectedRoots: [resolve(stateRoot)] },
    sandbox: s?.sandbox ?? "none",
  };
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
