/**
 * Skill discovery cost on the turn's first-token path: a cold scan of 64 skills spread over the five roots, and
 * the warm revalidation every later turn pays (stat of roots, examined directories and SKILL.md files). Floor:
 * the same number of bare `stat` calls issued in parallel, measured in the same run.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Figure } from "./run.js";
import { SkillCatalog, skillRoots } from "../src/runtime/tools/skills.js";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

export default async function skillsBench(): Promise<Figure[]> {
  const base = mkdtempSync(join(tmpdir(), "berth-bench-skills-"));
  try {
    const o = { mcHome: join(base, "mc"), userHome: join(base, "home") };
    const cwd = join(base, "project");
    const roots = skillRoots(o, cwd);
    const files: string[] = [];
    for (let i = 0; i < 64; i++) {
      const dir = join(roots[i % roots.length] as string, `skill-${i}`);
      mkdirSync(dir, { recursive: true });
      const f = join(dir, "SKILL.md");
      writeFileSync(f, `---\nname: skill-${i}\ndescription: Does task number ${i} the careful way.\n---\n${"Body text. ".repeat(200)}\n`);
      files.push(dir, f);
    }
    const paths = [...roots, ...files];
    const cold: number[] = [];
    for (let k = 0; k < 5; k++) {
      const cat = new SkillCatalog(o);
      const t = performance.now();
      await cat.discover(cwd);
      cold.push(performance.now() - t);
    }
    const cat = new SkillCatalog(o);
    await cat.discover(cwd);
    const warm: number[] = [];
    const floor: number[] = [];
    for (let k = 0; k < 50; k++) {
      let t = performance.now();
      await cat.discover(cwd);
      warm.push(performance.now() - t);
      t = performance.now();
      await Promise.all(paths.map((p) => stat(p)));
      floor.push(performance.now() - t);
    }
    return [
      { name: "skills.discover_cold_64_ms.median", value: median(cold), unit: "ms" },
      { name: "skills.revalidate_warm_64_ms.median", value: median(warm), unit: "ms", floor_parallel_stat_ms: median(floor), stats: paths.length },
    ];
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}
