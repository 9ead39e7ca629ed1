/**
 * `read_skill {name}`: the SKILL.md of one skill listed in the system prompt (see skills.ts for discovery,
 * bounds and containment). Risk: read-only (it reads nothing but a discovered skill's SKILL.md).
 */
import type { Tool } from "../types.js";
import { defineLocalTool } from "./define.js";
import { fail, ok } from "./result.js";
import type { SkillCatalog } from "./skills.js";
import { READ_SKILL_DEF, READ_SKILL_RISK, READ_SKILL_TOOL_NAME } from "./specs.js";

export { READ_SKILL_RISK, READ_SKILL_TOOL_NAME };


export function createReadSkillTool(catalog: SkillCatalog): Tool {
  return defineLocalTool({
    ...READ_SKILL_DEF,
    async execute(args, ctx) {
      const r = await catalog.read(ctx.cwd, args.name);
      if (!r.ok) return fail("failed", `read_skill: ${r.message}`);
      return ok(`Skill directory: ${r.skill.dir}\n\n${r.text}`);
    },
  });
}
