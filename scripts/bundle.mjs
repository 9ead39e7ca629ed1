#!/usr/bin/env node
// Bundles the compiled CLI (dist/src/cli/main.js, from `tsc`) into dist/cold/ with esbuild: one ES module per lazy
// boundary (code splitting keeps every dynamic `import()` lazy), our modules only (packages stay in node_modules and
// load as before). A fresh process then resolves and compiles a few files instead of ~150 (docs/runtime.md,
// "Cold start"). `import.meta.url` in each module is rewritten to that module's own compiled location, so
// paths relative to it (package.json, bin/berth, ui/, the search worker) resolve as they do unbundled.
// bin/berth and bin/magi-code use dist/cold/ only when it is newer than the last `tsc` build (dist/.tsbuildinfo).
import { build } from "esbuild";
import { readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { COLD_COMMANDS, SPLIT_COMMANDS, buildColdScripts, restScriptOf, scriptOf, trainCodeCache } from "./code-cache.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
const outdir = join(root, "dist", "cold");
const t0 = Date.now();
await rm(outdir, { recursive: true, force: true });
const result = await build({
  entryPoints: { main: join(root, "dist", "src", "cli", "main.js") },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  packages: "external",
  chunkNames: "c-[hash]",
  logLevel: "error",
  metafile: true,
  plugins: [
    {
      name: "own-import-meta-url",
      setup(b) {
        b.onLoad({ filter: /\/dist\/src\/.*\.js$/ }, async (args) => {
          let text = await readFile(args.path, "utf8");
          if (text.includes("import.meta.url") || text.includes("import.meta.dirname")) {
            const rel = relative(outdir, args.path).split("\\").join("/");
            text = text.replaceAll("import.meta.url", `new URL(${JSON.stringify(rel)}, import.meta.url).href`);
            text = text.replaceAll("import.meta.dirname", `(import.meta.dirname + ${JSON.stringify("/" + dirname(rel))})`);
          }
          return { contents: text, loader: "js", resolveDir: dirname(args.path) };
        });
      },
    },
  ],
});
await writeFile(join(outdir, "meta.json"), JSON.stringify(result.metafile));
const files = Object.keys(result.metafile.outputs).filter((f) => f.endsWith(".js"));
process.stdout.write(`bundle: ${files.length} files in ${relative(root, outdir)}/ (${Date.now() - t0} ms)\n`);
// The one-script form of the session commands and its V8 code cache (scripts/code-cache.mjs). Without it (the
// script cannot be built, or a command's training fails) those commands run from the ES modules above: the build
// says so but does not fail (test/cli/code-cache.test.ts does).
const t1 = Date.now();
try {
  await buildColdScripts();
  const failed = await trainCodeCache();
  for (const f of failed) process.stderr.write(`bundle: no code cache for ${f}\n`);
  process.stdout.write(`bundle: ${relative(root, outdir)}/berth-{${COLD_COMMANDS.join(",")}}.cjs and their code caches (${Date.now() - t1} ms)\n`);
} catch (err) {
  for (const command of COLD_COMMANDS) await rm(scriptOf(command), { force: true });
  for (const command of Object.keys(SPLIT_COMMANDS)) await rm(restScriptOf(command), { force: true });
  await rm(join(outdir, "cache"), { recursive: true, force: true });
  process.stderr.write(`bundle: no code cache (${err instanceof Error ? err.message : String(err)})\n`);
}
