import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { buildSystemPrompt, MAX_SKILLS_SECTION_BYTES } from "../../src/runtime/system-prompt.js";
import { createReadSkillTool } from "../../src/runtime/tools/read-skill.js";
import { createToolRegistry } from "../../src/runtime/tools/registry.js";
import {
  MAX_DESCRIPTION_CHARS,
  MAX_SKILL_DIRS_PER_ROOT,
  MAX_SKILL_FILE_BYTES,
  MAX_SKILLS,
  parseFrontMatter,
  SkillCatalog,
} from "../../src/runtime/tools/skills.js";
import { call, makeCtx, tempDir } from "./helpers.js";

function skill(root: string, dir: string, name: string, description: string, body = "Do the thing."): string {
  const d = join(root, dir);
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, "SKILL.md"), `---\nname: ${name}\ndescription: ${description}\n---\n${body}\n`);
  return d;
}

function layout(t: { after(fn: () => void): void }): { mcHome: string; userHome: string; cwd: string; outside: string } {
  const base = tempDir(t);
  const o = { mcHome: join(base, "mc"), userHome: join(base, "home"), cwd: join(base, "project"), outside: join(base, "outside") };
  for (const d of Object.values(o)) mkdirSync(d, { recursive: true });
  return o;
}

void test("front matter: name/description, quotes, block scalars; malformed or unnamed files are not skills", () => {
  assert.deepEqual(parseFrontMatter("---\nname: pdf\ndescription: 'Work with PDFs'\n---\nbody"), { name: "pdf", description: "Work with PDFs" });
  assert.deepEqual(parseFrontMatter("\uFEFF---\r\nname: a-b_c.d\r\ndescription: >\r\n  folded\r\n  text\r\n---\r\n"), { name: "a-b_c.d", description: "folded text" });
  assert.equal(parseFrontMatter("name: x\ndescription: y\n"), null, "no front matter");
  assert.equal(parseFrontMatter("---\nname: x\ndescription: y\n"), null, "unterminated");
  assert.equal(parseFrontMatter("---\nname: x\n---\n"), null, "no description");
  assert.equal(parseFrontMatter("---\nname: ../x\ndescription: y\n---\n"), null, "unsafe name");
  assert.equal(parseFrontMatter(`---\nname: ${"n".repeat(64)}\ndescription: y\n---\n`)?.name, "n".repeat(64));
  assert.equal(parseFrontMatter(`---\nname: ${"n".repeat(65)}\ndescription: y\n---\n`), null, "name over 64");
  const long = parseFrontMatter(`---\nname: x\ndescription: ${"d".repeat(MAX_DESCRIPTION_CHARS + 10)}\n---\n`);
  assert.equal(long?.description.length, MAX_DESCRIPTION_CHARS);
});

void test("discovery: every root, user roots win over the workspace, cache revalidates on change", async (t) => {
  const o = layout(t);
  skill(join(o.mcHome, "skills"), "a", "alpha", "from MC_HOME");
  skill(join(o.userHome, ".agents", "skills"), "b", "beta", "from ~/.agents");
  skill(join(o.userHome, ".claude", "skills"), "c", "gamma", "from ~/.claude");
  skill(join(o.cwd, ".agents", "skills"), "d", "delta", "from workspace .agents");
  skill(join(o.cwd, ".claude", "skills"), "e", "alpha", "workspace copy must not shadow the user's");
  skill(join(o.cwd, ".claude", "skills"), "f", "epsilon", "from workspace .claude");
  mkdirSync(join(o.cwd, ".claude", "skills", "no-skill-md"));
  const cat = new SkillCatalog(o);
  let found = await cat.discover(o.cwd);
  assert.deepEqual(
    found.map((s) => [s.name, s.description]),
    [
      ["alpha", "from MC_HOME"],
      ["beta", "from ~/.agents"],
      ["gamma", "from ~/.claude"],
      ["delta", "from workspace .agents"],
      ["epsilon", "from workspace .claude"],
    ],
  );
  // A new skill directory, and an edited SKILL.md, are seen by the next call (no restart).
  skill(join(o.mcHome, "skills"), "z", "zeta", "added later");
  const f = join(o.userHome, ".agents", "skills", "b", "SKILL.md");
  writeFileSync(f, "---\nname: beta\ndescription: edited\n---\n");
  utimesSync(f, new Date(), new Date(Date.now() + 5000));
  // A SKILL.md created in a directory that had none is seen too.
  writeFileSync(join(o.cwd, ".claude", "skills", "no-skill-md", "SKILL.md"), "---\nname: late\ndescription: late file\n---\n");
  found = await cat.discover(o.cwd);
  assert.deepEqual(found.map((s) => s.name).sort(), ["alpha", "beta", "delta", "epsilon", "gamma", "late", "zeta"]);
  assert.equal(found.find((s) => s.name === "beta")?.description, "edited");
  // Another workspace sees only the user roots.
  const other = join(o.outside, "ws");
  mkdirSync(other);
  assert.deepEqual((await cat.discover(other)).map((s) => s.name), ["alpha", "zeta", "beta", "gamma"]);
});

void test("discovery: missing roots contribute nothing, and a root created later is found by the next call", async (t) => {
  const o = layout(t);
  const cat = new SkillCatalog(o);
  assert.deepEqual(await cat.discover(o.cwd), [], "every root missing");
  skill(join(o.cwd, ".agents", "skills"), "w", "late-root", "a root that did not exist at the first call");
  skill(join(o.mcHome, "skills"), "m", "home-root", "in MC_HOME, created later");
  assert.deepEqual((await cat.discover(o.cwd)).map((s) => s.name), ["home-root", "late-root"]);
  // A root that is a file, not a directory, contributes nothing either.
  writeFileSync(join(o.userHome, ".claude-file"), "x");
  const asFile = new SkillCatalog({ mcHome: join(o.userHome, ".claude-file"), userHome: o.outside });
  assert.deepEqual(await asFile.discover(o.outside), []);
});

void test("discovery bounds: entries examined per root and skills in all", async (t) => {
  const o = layout(t);
  const root = join(o.mcHome, "skills");
  for (let i = 0; i < MAX_SKILL_DIRS_PER_ROOT + 1; i++) skill(root, `s${String(i).padStart(4, "0")}`, `s${String(i).padStart(4, "0")}`, "x");
  const found = await new SkillCatalog(o).discover(o.cwd);
  assert.equal(found.length, MAX_SKILLS);
  assert.equal(found[0]?.name, "s0000");
  // Per-root bound: only the first MAX_SKILL_DIRS_PER_ROOT entries (sorted) are examined.
  const o2 = layout(t);
  const root2 = join(o2.userHome, ".claude", "skills");
  for (let i = 0; i < MAX_SKILL_DIRS_PER_ROOT; i++) mkdirSync(join(root2, `e${String(i).padStart(4, "0")}`), { recursive: true });
  skill(root2, "zz-after-bound", "late", "never examined");
  skill(root2, `e${String(MAX_SKILL_DIRS_PER_ROOT - 1).padStart(4, "0")}`, "last", "the last examined entry");
  assert.deepEqual((await new SkillCatalog(o2).discover(o2.cwd)).map((s) => s.name), ["last"]);
});

void test("read_skill: only discovered names, bounded SKILL.md, symlink escapes refused at discovery and at read", async (t) => {
  const o = layout(t);
  const root = join(o.cwd, ".agents", "skills");
  const dir = skill(root, "pdf", "pdf", "PDF work", "Use pdftotext.");
  skill(root, "big", "big", "a large skill", "x".repeat(MAX_SKILL_FILE_BYTES + 100));
  // An escaping symlinked skill directory is never discovered.
  skill(o.outside, "evil", "evil", "outside the root");
  symlinkSync(join(o.outside, "evil"), join(root, "evil"));
  // A symlink inside the root to another skill inside the root is fine.
  const cat = new SkillCatalog(o);
  const tool = createReadSkillTool(cat);
  const ctx = makeCtx(o.cwd);
  let r = await call(tool, { name: "pdf" }, ctx);
  assert.equal(r.isError, false);
  assert.ok(r.content.startsWith(`Skill directory: ${dir}\n\n---\nname: pdf`));
  assert.match(r.content, /Use pdftotext\./);
  r = await call(tool, { name: "evil" }, ctx);
  assert.equal(r.isError, true);
  assert.match(r.content, /unknown skill "evil"; available: big, pdf/);
  r = await call(tool, { name: "../../etc/passwd" }, ctx);
  assert.equal(r.isError, true);
  assert.match(r.content, /unknown skill/);
  r = await call(tool, { name: "x".repeat(65) }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  r = await call(tool, { name: "big" }, ctx);
  assert.equal(r.isError, false);
  assert.match(r.content, new RegExp(`SKILL\\.md truncated at ${MAX_SKILL_FILE_BYTES} bytes`));
  assert.ok(Buffer.byteLength(r.content) < MAX_SKILL_FILE_BYTES + 300);
  // Swap the discovered SKILL.md for a symlink leaving the root: the read revalidates and refuses it
  // (discovery also drops it now, so the name is unknown).
  rmSync(join(dir, "SKILL.md"));
  writeFileSync(join(o.outside, "secret.md"), "---\nname: pdf\ndescription: PDF work\n---\nsecret\n");
  symlinkSync(join(o.outside, "secret.md"), join(dir, "SKILL.md"));
  r = await call(tool, { name: "pdf" }, ctx);
  assert.equal(r.isError, true);
  assert.doesNotMatch(r.content, /secret/);
});

void test("a SKILL.md that is a FIFO is skipped without blocking the thread pool", { timeout: 30_000 }, async (t) => {
  const o = layout(t);
  const root = join(o.cwd, ".agents", "skills");
  skill(root, "good", "good", "a regular skill");
  // More FIFOs than the libuv pool has threads (4 by default): a blocking open of each would park every thread.
  for (let i = 0; i < 8; i++) {
    mkdirSync(join(root, `fifo${i}`), { recursive: true });
    execFileSync("mkfifo", [join(root, `fifo${i}`, "SKILL.md")]);
  }
  const cat = new SkillCatalog(o);
  assert.deepEqual((await cat.discover(o.cwd)).map((s) => s.name), ["good"]);
  const r = await call(createReadSkillTool(cat), { name: "good" }, makeCtx(o.cwd));
  assert.equal(r.isError, false);
  // The pool is still free: an ordinary file read settles.
  assert.match(await readFile(join(root, "good", "SKILL.md"), "utf8"), /name: good/);
});

void test("system prompt lists skills (bounded); tool-free sessions get neither skills nor read_skill", async (t) => {
  const o = layout(t);
  skill(join(o.mcHome, "skills"), "a", "alpha", "first skill");
  const cat = new SkillCatalog(o);
  const skills = await cat.discover(o.cwd);
  const withTools = await buildSystemPrompt({ cwd: o.cwd, now: new Date(0), tools: [{ name: "read_skill", description: "", inputSchema: {} }], skills });
  assert.match(withTools, /Skills \(call read_skill[^\n]*\n- alpha: first skill/);
  const none = await buildSystemPrompt({ cwd: o.cwd, now: new Date(0), tools: [], skills });
  assert.doesNotMatch(none, /alpha/);
  const many = Array.from({ length: 64 }, (_, i) => ({ name: `s${i}`, description: "d".repeat(1000) }));
  const big = await buildSystemPrompt({ cwd: o.cwd, now: new Date(0), tools: [{ name: "read", description: "", inputSchema: {} }], skills: many });
  const section = big.slice(big.indexOf("Skills ("));
  assert.ok(Buffer.byteLength(section) <= MAX_SKILLS_SECTION_BYTES);
  assert.match(section, /\(\d+ more skills not listed\)$/);
  const reg = await createToolRegistry({ cwd: o.cwd, noTools: true, skills: cat, webFetch: {} });
  assert.deepEqual(reg.tools, []);
  const full = await createToolRegistry({ cwd: o.cwd, skills: cat, webFetch: {} });
  assert.deepEqual(full.specs().map((s) => s.name).slice(-2), ["read_skill", "web_fetch"]);
  await Promise.all([reg.close(), full.close()]);
});
