/**
 * `read_skill {name}`: the SKILL.md of one skill listed in the system prompt (see skills.ts for discovery,
 * bounds and containment). Risk: read-only (it reads nothing but a discovered skill's SKILL.md).
 */
import * as A from "../../core/arg-schema.js";
import type { Tool } from "../types.js";
import { defineLocalTool } from "./define.js";
import { fail, ok } from "./result.js";
import type { SkillCatalog } from "./skills.js";

export const READ_SKILL_TOOL_NAME = "read_skill";
/** Risk class for the approval layer: this tool only reads. */
export const READ_SKILL_RISK = "read_only" as const;

const ReadSkillArgs = A.object({
  name: A.string({ min: 1, max: 64, description: "The skill's name, exactly as listed under Skills in the system prompt." }),
});

export function createReadSkillTool(catalog: SkillCatalog): Tool {
  return defineLocalTool({
    name: READ_SKILL_TOOL_NAME,
    risk: READ_SKILL_RISK,
    description:
      "Read the instructions (SKILL.md) of one of the skills listed in the system prompt. Read a skill before doing a task it describes; files it mentions are relative to its directory, given in the first line.",
    schema: ReadSkillArgs,
    async execute(args, ctx) {
      const r = await catalog.read(ctx.cwd, args.name);
      if (!r.ok) return fail("failed", `read_skill: ${r.message}`);
      return ok(`Skill directory: ${r.skill.dir}\n\n${r.text}`);
    },
  });
}
