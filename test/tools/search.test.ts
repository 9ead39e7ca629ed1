import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { compileGlob, globMatch } from "../../src/runtime/tools/glob-match.js";
import { globTool } from "../../src/runtime/tools/glob.js";
import { grepTool } from "../../src/runtime/tools/grep.js";
import { runSearch } from "../../src/runtime/tools/search.js";
import { boundNotes, SEARCH_MAX_ENTRIES } from "../../src/runtime/tools/search-tool-common.js";
import { call, makeCtx, tempDir } from "./helpers.js";

/** a.ts, b.js, .env, src/x.ts, src/y.tsx, src/deep/z.ts, src/bin.dat, .git/config.ts, node_modules/m/i.ts */
function tree(t: { after(fn: () => void): void }): string {
  const dir = tempDir(t);
  for (const d of ["src/deep", ".git", "node_modules/m"]) mkdirSync(join(dir, d), { recursive: true });
  const files: Record<string, string> = {
    "a.ts": "export const alpha = 1;\n",
    "b.js": "const beta = 'Alpha';\n",
    ".env": "TOKEN=alpha\n",
    "src/x.ts": "import { alpha } from '../a.js';\nconsole.log(alpha);\n",
    "src/y.tsx": "const y = <div/>;\r\nalpha();\r\n",
    "src/deep/z.ts": "// nothing here\n",
    ".git/config.ts": "alpha\n",
    "node_modules/m/i.ts": "alpha\n",
  };
  for (const [p, c] of Object.entries(files)) writeFileSync(join(dir, p), c);
  writeFileSync(join(dir, "src/bin.dat"), Buffer.from("alpha\u0000binary"));
  return dir;
}

void test("glob matcher: *, ?, **, {a,b}, classes, escapes", () => {
  const cases: Array<[string, string, boolean]> = [
    ["*.ts", "a.ts", true],
    ["*.ts", "src/a.ts", false],
    ["**/*.ts", "a.ts", true],
    ["**/*.ts", "src/deep/z.ts", true],
    ["src/**", "src/deep/z.ts", true],
    ["src/**/z.ts", "src/z.ts", true],
    ["src/**/z.ts", "src/a/b/z.ts", true],
    ["src/**/z.ts", "srcx/z.ts", false],
    ["?.ts", "a.ts", true],
    ["?.ts", "ab.ts", false],
    ["a?b", "a/b", false],
    ["*.{ts,tsx}", "y.tsx", true],
    ["*.{ts,tsx}", "y.js", false],
    ["{src,lib}/**/*.{ts,js}", "lib/q/r.js", true],
    ["{a,{b,c}}.txt", "c.txt", true],
    ["[ab].ts", "b.ts", true],
    ["[!ab].ts", "c.ts", true],
    ["[!ab].ts", "a.ts", false],
    ["[a-c]x", "bx", true],
    ["\\*.ts", "*.ts", true],
    ["\\*.ts", "a.ts", false],
    ["a.b", "axb", false],
    ["{x}.ts", "{x}.ts", true],
    ["*", ".env", true],
    ["(a)+.ts", "(a)+.ts", true],
  ];
  for (const [pattern, path, expected] of cases) assert.equal(globMatch(pattern, path), expected, `${pattern} vs ${path}`);
  assert.throws(() => compileGlob("x".repeat(2000)));
});

void test("glob tool: recursive match, skips .git/node_modules, path prefix, limit, no match", async (t) => {
  const dir = tree(t);
  const ctx = makeCtx(dir);
  let r = await call(globTool, { pattern: "**/*.ts" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(r.content, "a.ts\nsrc/x.ts\nsrc/deep/z.ts");
  r = await call(globTool, { pattern: "**/*.{ts,tsx}", path: "src" }, ctx);
  assert.equal(r.content, "src/x.ts\nsrc/y.tsx\nsrc/deep/z.ts");
  r = await call(globTool, { pattern: "**", limit: 2 }, ctx);
  assert.equal(r.content, ".env\na.ts\n[stopped at 2 paths; raise limit or narrow the search]");
  r = await call(globTool, { pattern: "*.rs" }, ctx);
  assert.equal(r.content, "no files match");
  r = await call(globTool, { pattern: "*", path: "missing" }, ctx);
  assert.equal(r.errorKind, "failed");
  r = await call(globTool, { pattern: "*", path: "a.ts" }, ctx);
  assert.match(r.content, /not a directory/);
  r = await call(globTool, { pattern: 5 }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
});

void test("grep tool: regex over files, include glob, ignore_case, single file, limits, errors", async (t) => {
  const dir = tree(t);
  const ctx = makeCtx(dir);
  let r = await call(grepTool, { pattern: "alpha" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(
    r.content,
    [".env:1: TOKEN=alpha", "a.ts:1: export const alpha = 1;", "src/x.ts:1: import { alpha } from '../a.js';", "src/x.ts:2: console.log(alpha);", "src/y.tsx:2: alpha();"].join("\n"),
  );
  assert.deepEqual(ctx.progress, ["searching", "5 matches"]);
  r = await call(grepTool, { pattern: "^alpha", glob: "*.tsx", path: "src" }, ctx);
  assert.equal(r.content, "src/y.tsx:2: alpha();");
  r = await call(grepTool, { pattern: "ALPHA", ignore_case: true, glob: "*.js" }, ctx);
  assert.equal(r.content, "b.js:1: const beta = 'Alpha';");
  r = await call(grepTool, { pattern: "alpha", path: "src/x.ts" }, ctx);
  assert.equal(r.content, "src/x.ts:1: import { alpha } from '../a.js';\nsrc/x.ts:2: console.log(alpha);");
  r = await call(grepTool, { pattern: "alpha", limit: 1 }, ctx);
  assert.equal(r.content, ".env:1: TOKEN=alpha\n[stopped at 1 matches; raise limit or narrow the search]");
  r = await call(grepTool, { pattern: "zzz_none" }, ctx);
  assert.equal(r.content, "no matches");
  r = await call(grepTool, { pattern: "(unclosed" }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  r = await call(grepTool, { pattern: "x", path: "missing" }, ctx);
  assert.equal(r.errorKind, "failed");
});

void test("grep tool: abort stops a pathological regex without blocking the event loop", async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, "evil.txt"), `${"a".repeat(40)}!\n`);
  const ac = new AbortController();
  const ctx = makeCtx(dir, ac.signal);
  const running = call(grepTool, { pattern: "^(a+)+$" }, ctx);
  // The regex would run for ages; the main loop still ticks and the abort lands.
  setImmediate(() => {
    const wait = setInterval(() => {
      if (ctx.progress.includes("searching")) {
        clearInterval(wait);
        ac.abort();
      }
    }, 5);
  });
  const r = await running;
  assert.equal(r.errorKind, "cancelled");
});

void test("grep: a match deep in a long line is shown with the text around it", async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, "min.js"), `${"x".repeat(100_000)}NEEDLE${"y".repeat(1000)}\n`);
  const r = await call(grepTool, { pattern: "NEEDLE" }, makeCtx(dir));
  assert.equal(r.content, `min.js:1: [… 99900 chars cut] ${"x".repeat(100)}NEEDLE${"y".repeat(394)} [… 606 chars cut]`);
});

void test("grep: files over 10 MiB and binary files are named, not silently passed as 'no matches'", async (t) => {
  const dir = tempDir(t);
  const limit = 10 * 1024 * 1024;
  const text = (size: number): Buffer => Buffer.concat([Buffer.from("NEEDLE\n"), Buffer.alloc(size - 7, 0x61)]);
  writeFileSync(join(dir, "at-limit.log"), text(limit));
  writeFileSync(join(dir, "over.log"), text(limit + 1));
  writeFileSync(join(dir, "bin.dat"), Buffer.from("NEEDLE\u0000"));
  const ctx = makeCtx(dir);
  let r = await call(grepTool, { pattern: "NEEDLE" }, ctx);
  assert.equal(r.content, "at-limit.log:1: NEEDLE\n[not searched, over 10 MiB: over.log; use bash (e.g. grep -n) for them]");
  r = await call(grepTool, { pattern: "NEEDLE", path: "over.log" }, ctx);
  assert.equal(r.errorKind, "limit");
  assert.equal(r.content, `grep: over.log is ${limit + 1} bytes, over the ${limit} bytes (10 MiB) grep searches; use bash (e.g. grep -n) or read it in pages`);
  r = await call(grepTool, { pattern: "NEEDLE", path: "at-limit.log" }, ctx);
  assert.equal(r.content, "at-limit.log:1: NEEDLE");
  r = await call(grepTool, { pattern: "NEEDLE", path: "bin.dat" }, ctx);
  assert.equal(r.errorKind, "failed");
  assert.equal(r.content, "grep: bin.dat looks like a binary file (a NUL byte in its first 8 KiB); grep searches text files only");
});

void test("glob: a symlink to a directory is not descended nor listed as a file; a dangling or looping one is not listed; notes name them", async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, "real"));
  writeFileSync(join(dir, "real", "f.ts"), "");
  writeFileSync(join(dir, "a.ts"), "");
  symlinkSync("real", join(dir, "linked"));
  symlinkSync("a.ts", join(dir, "alias.ts"));
  symlinkSync("missing.ts", join(dir, "dangling.ts"));
  symlinkSync("loop.ts", join(dir, "loop.ts"));
  symlinkSync(".", join(dir, "self"));
  const ctx = makeCtx(dir);
  let r = await call(globTool, { pattern: "**" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(
    r.content,
    [
      "a.ts",
      "alias.ts",
      "real/f.ts",
      "[not followed: symlinked directories linked, self; pass one as path to search it]",
      "[not listed: symlinks leading to no file (dangling, looping or special) dangling.ts, loop.ts]",
    ].join("\n"),
  );
  // A symlinked directory given as the path is searched (its target is inside the workspace).
  r = await call(globTool, { pattern: "**/*.ts", path: "linked" }, ctx);
  assert.equal(r.content, "linked/f.ts");
  // Only matching dangling links are named, and only links a match could have been under; grep skips them all silently.
  r = await call(globTool, { pattern: "real/**" }, ctx);
  assert.equal(r.content, "real/f.ts");
  assert.equal((await call(grepTool, { pattern: "x" }, ctx)).content, "no matches");
});

void test("glob: the note names only symlinked directories a match could have been under", async (t) => {
  const dir = tempDir(t);
  for (const d of ["src/real", "docs"]) mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, "src", "real", "f.ts"), "");
  symlinkSync("real", join(dir, "src", "gen"));
  symlinkSync("../src/real", join(dir, "docs", "x"));
  symlinkSync("src", join(dir, "lib"));
  const ctx = makeCtx(dir);
  const note = (names: string): string => `\n[not followed: symlinked director${names.includes(",") ? "ies" : "y"} ${names}; pass one as path to search it]`;
  const cases: Array<[string, string]> = [
    // Before, each of these named every link the walk met: lib, docs/x, src/gen.
    ["src/**/*.ts", note("src/gen")],
    ["*.ts", ""], // no directory at all
    ["src/*.ts", ""], // src/gen/… is one level too deep
    ["src/gen/*.ts", note("src/gen")],
    ["{docs,src}/**/*.ts", note("docs/x, src/gen")],
    ["**/*.ts", note("lib, docs/x, src/gen")],
    ["l?b/**", note("lib")],
    ["[!d]*/**", note("lib, src/gen")],
    // Inside braces an alternative of `**` spans directories: `s.*/f.ts` could match src/gen/f.ts.
    ["s{**,y}/f.ts", note("src/gen")],
  ];
  for (const [pattern, expected] of cases) {
    const r = await call(globTool, { pattern }, ctx);
    const files = r.content.split("\n[")[0];
    assert.equal(r.content, `${files}${expected}`, pattern);
  }
});

void test("search walk: a directory is read only up to the entry bound (bound+1 entries), and the note names it", async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, "big"));
  for (let i = 0; i < 6; i++) writeFileSync(join(dir, "big", `f${i}`), "");
  const job = { op: "glob" as const, root: join(dir, "big"), rootIsFile: false, roots: { allowed: [dir], denied: [], confine: false }, pattern: "**", limit: 100 };
  const atBound = await runSearch({ ...job, maxEntries: 6 }, new AbortController().signal, 30_000);
  assert.equal(atBound.ok && atBound.walkTruncated, false);
  assert.equal(atBound.ok && atBound.results.length, 6);
  const past = await runSearch({ ...job, root: dir, maxEntries: 6 }, new AbortController().signal, 30_000);
  assert.ok(past.ok && "results" in past);
  assert.equal(past.walkTruncated, true);
  assert.equal(past.stoppedIn, "big");
  assert.equal(past.results.length, 5, "the root's one entry and five of big/'s entries were visited");
  assert.equal(
    boundNotes(past, 100, "paths", "ws"),
    `\n[search stopped after visiting ${SEARCH_MAX_ENTRIES} entries (it was reading ws/big/); results are incomplete; narrow the path]`,
  );
});
