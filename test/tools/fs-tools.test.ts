import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readTool } from "../../src/runtime/tools/read.js";
import { writeTool } from "../../src/runtime/tools/write.js";
import { editTool } from "../../src/runtime/tools/edit.js";
import { createLsTool, lsTool } from "../../src/runtime/tools/ls.js";
import { MAX_RESULT_BYTES } from "../../src/runtime/tools/result.js";
import { call, makeCtx, tempDir } from "./helpers.js";

void test("read: whole file, offset/limit window, continuation note", async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, "a.txt"), "one\ntwo\r\nthree\nfour\n");
  const ctx = makeCtx(dir);
  let r = await call(readTool, { path: "a.txt" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(r.content, "one\ntwo\nthree\nfour");
  r = await call(readTool, { path: "a.txt", offset: 2, limit: 2 }, ctx);
  assert.equal(r.content, "two\nthree\n[showing lines 2-3; more remain: continue with offset=4]");
  r = await call(readTool, { path: join(dir, "a.txt"), offset: 4 }, ctx);
  assert.equal(r.content, "four");
  writeFileSync(join(dir, "empty.txt"), "");
  r = await call(readTool, { path: "empty.txt" }, ctx);
  assert.equal(r.content, "(empty file)");
});

void test("read: errors — missing, directory, binary, offset past end, bad args", async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, "bin"), Buffer.from([1, 2, 0, 3]));
  writeFileSync(join(dir, "s.txt"), "x\n");
  const ctx = makeCtx(dir);
  let r = await call(readTool, { path: "nope.txt" }, ctx);
  assert.equal(r.errorKind, "failed");
  assert.match(r.content, /ENOENT/);
  r = await call(readTool, { path: "." }, ctx);
  assert.match(r.content, /is a directory/);
  r = await call(readTool, { path: "bin" }, ctx);
  assert.match(r.content, /binary/);
  r = await call(readTool, { path: "s.txt", offset: 5 }, ctx);
  assert.match(r.content, /past the end/);
  r = await call(readTool, { path: "s.txt", offset: 0 }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  r = await call(readTool, { path: "s.txt", extra: 1 }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
});

void test("read: output stays bounded for a large file and long lines", async (t) => {
  const dir = tempDir(t);
  const line = "y".repeat(200);
  writeFileSync(join(dir, "big.txt"), Array.from({ length: 5000 }, () => line).join("\n") + "\n" + "z".repeat(10_000));
  const r = await call(readTool, { path: "big.txt", limit: 10_000 }, makeCtx(dir));
  assert.equal(r.isError, false);
  assert.ok(Buffer.byteLength(r.content) <= MAX_RESULT_BYTES);
  assert.match(r.content, /continue with offset=\d+\]$/);
  const last = await call(readTool, { path: "big.txt", offset: 5001 }, makeCtx(dir));
  assert.match(last.content, /^z{4000} \[… line cut at 4000 chars\]$/);
});

void test("write: creates parent dirs, overwrites; non-string path creates nothing", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  let r = await call(writeTool, { path: "deep/er/f.txt", content: "héllo" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(r.content, "wrote 6 bytes to deep/er/f.txt");
  assert.equal(readFileSync(join(dir, "deep/er/f.txt"), "utf8"), "héllo");
  r = await call(writeTool, { path: "deep/er/f.txt", content: "new" }, ctx);
  assert.equal(readFileSync(join(dir, "deep/er/f.txt"), "utf8"), "new");
  // Rejected by validation before running — and `run` re-validates when called directly.
  r = await call(writeTool, { path: 42, content: "x" }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  r = await writeTool.run({ path: 42, content: "x" }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  assert.equal(existsSync(join(dir, "42")), false);
  r = await call(writeTool, { path: "f2.txt" }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  assert.match(r.content, /content/);
  assert.equal(existsSync(join(dir, "f2.txt")), false);
});

void test("edit: exact single match, not found, ambiguous, replace_all, identical, CRLF", async (t) => {
  const dir = tempDir(t);
  const f = join(dir, "e.txt");
  writeFileSync(f, "alpha beta\ngamma beta\n");
  const ctx = makeCtx(dir);
  let r = await call(editTool, { path: "e.txt", old_string: "alpha", new_string: "ALPHA" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(readFileSync(f, "utf8"), "ALPHA beta\ngamma beta\n");
  r = await call(editTool, { path: "e.txt", old_string: "delta", new_string: "x" }, ctx);
  assert.equal(r.errorKind, "failed");
  assert.match(r.content, /not found/);
  r = await call(editTool, { path: "e.txt", old_string: "beta", new_string: "B" }, ctx);
  assert.match(r.content, /occurs 2 times/);
  assert.equal(readFileSync(f, "utf8"), "ALPHA beta\ngamma beta\n", "an ambiguous edit changes nothing");
  r = await call(editTool, { path: "e.txt", old_string: "beta", new_string: "$&B", replace_all: true }, ctx);
  assert.equal(r.content, "edited e.txt: replaced 2 occurrences");
  assert.equal(readFileSync(f, "utf8"), "ALPHA $&B\ngamma $&B\n", "replacement text is literal");
  r = await call(editTool, { path: "e.txt", old_string: "x", new_string: "x" }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  r = await call(editTool, { path: "e.txt", old_string: "", new_string: "x" }, ctx);
  assert.equal(r.errorKind, "invalid_arguments");
  r = await call(editTool, { path: "missing.txt", old_string: "a", new_string: "b" }, ctx);
  assert.match(r.content, /ENOENT/);
  writeFileSync(join(dir, "w.txt"), "a\r\nb\r\nc\r\n");
  r = await call(editTool, { path: "w.txt", old_string: "a\nb", new_string: "A\nB" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(readFileSync(join(dir, "w.txt"), "utf8"), "A\r\nB\r\nc\r\n");
});

void test("edit: a replace_all whose result no string can hold is refused by name, the file unchanged", async (t) => {
  const dir = tempDir(t);
  const f = join(dir, "big.txt");
  writeFileSync(f, "a".repeat(1_000_000));
  // 1,000,000 occurrences × 65,536 characters: 65.5 G characters (it failed with V8's "Invalid string length").
  const r = await call(editTool, { path: "big.txt", old_string: "a", new_string: "x".repeat(65_536), replace_all: true }, makeCtx(dir));
  assert.equal(r.errorKind, "failed");
  assert.equal(
    r.content,
    "edit: replacing 1,000,000 occurrences would make big.txt 65,536,000,000 characters long, more than an edit can hold (536,870,888); use a longer old_string or a shorter new_string",
  );
  assert.equal(readFileSync(f, "utf8"), "a".repeat(1_000_000));
});

void test("ls: sorted entries with dir markers, limit, errors", async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, "sub"));
  writeFileSync(join(dir, "b.txt"), "");
  writeFileSync(join(dir, ".hidden"), "");
  const ctx = makeCtx(dir);
  let r = await call(lsTool, {}, ctx);
  assert.equal(r.content, ".hidden\nb.txt\nsub/");
  r = await call(lsTool, { path: ".", limit: 1 }, ctx);
  assert.equal(r.content, ".hidden\n[2 more entries not shown; raise limit]");
  r = await call(lsTool, { path: "sub" }, ctx);
  assert.equal(r.content, "(empty directory)");
  r = await call(lsTool, { path: "b.txt" }, ctx);
  assert.equal(r.errorKind, "failed");
});

void test("a tool run with an already-aborted signal is cancelled and does nothing", async (t) => {
  const dir = tempDir(t);
  const ac = new AbortController();
  ac.abort();
  const r = await call(writeTool, { path: "x.txt", content: "x" }, makeCtx(dir, ac.signal));
  assert.equal(r.errorKind, "cancelled");
  assert.equal(existsSync(join(dir, "x.txt")), false);
});

void test("edit: a file that is not UTF-8 is refused by name and left byte for byte as it was", async (t) => {
  const dir = tempDir(t);
  const f = join(dir, "latin1.c");
  // Latin-1: "/* Größe */\nint x = 1;\n" — é/ö/ß are single bytes that are not UTF-8.
  const before = Buffer.concat([Buffer.from("/* Gr"), Buffer.from([0xf6, 0xdf]), Buffer.from("e */\nint x = 1;\n")]);
  writeFileSync(f, before);
  const r = await call(editTool, { path: "latin1.c", old_string: "int x = 1;", new_string: "int x = 2;" }, makeCtx(dir));
  assert.equal(r.errorKind, "failed");
  assert.equal(r.content, "edit: latin1.c is not UTF-8 text (the byte at offset 5 is not valid UTF-8); editing it would turn every such byte into U+FFFD, so it is left unchanged (use bash, e.g. sed, for files in other encodings)");
  assert.deepEqual(readFileSync(f), before);
  // Valid UTF-8, a byte-order mark and NUL bytes included, is edited byte-exactly.
  writeFileSync(join(dir, "u.txt"), Buffer.from("\ufeffGröße\u0000 = 1\n", "utf8"));
  const u = await call(editTool, { path: "u.txt", old_string: "1", new_string: "2" }, makeCtx(dir));
  assert.equal(u.isError, false, u.content);
  assert.deepEqual(readFileSync(join(dir, "u.txt")), Buffer.from("\ufeffGröße\u0000 = 2\n", "utf8"));
});

void test("edit: overlapping occurrences of old_string are ambiguous, not a unique match", async (t) => {
  const dir = tempDir(t);
  const f = join(dir, "o.txt");
  // "}\n}\n" occurs at offset 2 and at offset 4: which pair of braces was meant cannot be known.
  writeFileSync(f, "{\n}\n}\n}\n");
  const r = await call(editTool, { path: "o.txt", old_string: "}\n}\n", new_string: "}\n" }, makeCtx(dir));
  assert.equal(r.errorKind, "failed");
  assert.match(r.content, /^edit: old_string occurs more than once in o\.txt \(overlapping, at characters 2 and 4\); add surrounding context/);
  assert.equal(readFileSync(f, "utf8"), "{\n}\n}\n}\n");
  // replace_all keeps its meaning: every non-overlapping occurrence, from the start.
  const all = await call(editTool, { path: "o.txt", old_string: "}\n}\n", new_string: "]\n", replace_all: true }, makeCtx(dir));
  assert.equal(all.content, "edited o.txt: replaced 1 occurrence");
  assert.equal(readFileSync(f, "utf8"), "{\n]\n}\n");
  // One occurrence that merely touches another is still unique.
  writeFileSync(f, "ab ab");
  const one = await call(editTool, { path: "o.txt", old_string: "ab a", new_string: "x" }, makeCtx(dir));
  assert.equal(one.isError, false, one.content);
  assert.equal(readFileSync(f, "utf8"), "xb");
});

void test("write and edit replace a file atomically: a write that fails part-way leaves the old content whole", (t) => {
  const dir = tempDir(t);
  const f = join(dir, "orig.txt");
  writeFileSync(f, "x".repeat(3000));
  // A process whose file size limit (ulimit -f, 1 KiB blocks) stops a write at 2048 bytes, as a full disk or a quota
  // would: Node ignores SIGXFSZ, so the write fails with EFBIG. Writing in place truncated the file first and left
  // 2048 bytes of the new text.
  const tools = new URL("../../src/runtime/tools/", import.meta.url).href;
  const script = `
    const { writeTool } = await import(${JSON.stringify(`${tools}write.js`)});
    const { editTool } = await import(${JSON.stringify(`${tools}edit.js`)});
    const ctx = { cwd: process.argv[1], signal: new AbortController().signal, onProgress: () => {} };
    const w = await writeTool.run({ path: "orig.txt", content: "n".repeat(5000) }, ctx);
    const e = await editTool.run({ path: "orig.txt", old_string: "x", new_string: "yy", replace_all: true }, ctx);
    console.log(JSON.stringify([w, e]));`;
  const out = execFileSync("bash", ["-c", 'ulimit -f 2 && exec "$0" --input-type=module -e "$1" "$2"', process.execPath, script, dir], { encoding: "utf8" });
  const [w, e] = JSON.parse(out) as Array<{ isError: boolean; content: string }>;
  assert.equal(w?.isError, true);
  assert.match(w?.content ?? "", /^write: orig\.txt: EFBIG/);
  assert.equal(e?.isError, true);
  assert.match(e?.content ?? "", /^edit: orig\.txt: EFBIG/);
  assert.equal(readFileSync(f, "utf8"), "x".repeat(3000), "the old content is whole");
  assert.deepEqual(readdirSync(dir), ["orig.txt"], "no temporary file is left behind");
});

void test("an atomic replace keeps the file's mode and edits a symlink's target, not the link", async (t) => {
  const dir = tempDir(t);
  const f = join(dir, "run.sh");
  writeFileSync(f, "echo one\n");
  chmodSync(f, 0o754);
  symlinkSync("run.sh", join(dir, "link.sh"));
  const ctx = makeCtx(dir);
  const r = await call(editTool, { path: "link.sh", old_string: "one", new_string: "two" }, ctx);
  assert.equal(r.isError, false, r.content);
  assert.equal(readFileSync(f, "utf8"), "echo two\n");
  assert.equal(statSync(f).mode & 0o7777, 0o754);
  assert.ok(lstatSync(join(dir, "link.sh")).isSymbolicLink());
  assert.equal((await call(writeTool, { path: "run.sh", content: "echo three\n" }, ctx)).isError, false);
  assert.equal(statSync(f).mode & 0o7777, 0o754);
  assert.deepEqual(readdirSync(dir).sort(), ["link.sh", "run.sh"]);
  // setuid/setgid do not carry over to new content (a write to such a file drops them too).
  chmodSync(f, 0o6755);
  assert.equal((await call(editTool, { path: "run.sh", old_string: "three", new_string: "four" }, ctx)).isError, false);
  assert.equal(statSync(f).mode & 0o7777, 0o755);
  // The owner is kept where the process may set it (root here; elsewhere the file is the caller's anyway).
  if (process.getuid?.() === 0) {
    chownSync(f, 4321, 4322);
    assert.equal((await call(editTool, { path: "run.sh", old_string: "four", new_string: "five" }, ctx)).isError, false);
    assert.deepEqual([statSync(f).uid, statSync(f).gid, statSync(f).mode & 0o7777], [4321, 4322, 0o755]);
  }
});

void test("edit: a CRLF file keeps CRLF when a one-line old_string becomes several lines", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  writeFileSync(join(dir, "w.txt"), "a\r\nb\r\n");
  let r = await call(editTool, { path: "w.txt", old_string: "a", new_string: "x\ny" }, ctx);
  assert.equal(r.isError, false, r.content);
  assert.equal(readFileSync(join(dir, "w.txt"), "utf8"), "x\r\ny\r\nb\r\n");
  r = await call(editTool, { path: "w.txt", old_string: "b\r\n", new_string: "b\r\nc\nd\r\n" }, ctx);
  assert.equal(readFileSync(join(dir, "w.txt"), "utf8"), "x\r\ny\r\nb\r\nc\r\nd\r\n");
  // A file that mixes endings is not one to normalise: new_string goes in as given.
  writeFileSync(join(dir, "m.txt"), "a\r\nb\nc\n");
  r = await call(editTool, { path: "m.txt", old_string: "c", new_string: "c\nd" }, ctx);
  assert.equal(readFileSync(join(dir, "m.txt"), "utf8"), "a\r\nb\nc\nd\n");
});

void test("read: a file that is not UTF-8 says so (offset of the first bad byte); UTF-16 is refused by name", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  writeFileSync(join(dir, "latin1.txt"), Buffer.concat([Buffer.from("ok\ncaf"), Buffer.from([0xe9]), Buffer.from("\n")]));
  let r = await call(readTool, { path: "latin1.txt" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(
    r.content,
    "ok\ncaf\uFFFD\n[latin1.txt is not UTF-8 text: the byte at offset 6 is not valid UTF-8, and such bytes show as U+FFFD (\uFFFD). edit refuses this file and write would replace those bytes with U+FFFD: convert it with bash first (e.g. iconv -f LATIN1 -t UTF-8)]",
  );
  // The note is about the file, so it comes with any page of it.
  r = await call(readTool, { path: "latin1.txt", limit: 1 }, ctx);
  assert.match(r.content, /^ok\n\[showing lines 1-1; more remain: continue with offset=2\]\n\[latin1\.txt is not UTF-8 text: the byte at offset 6/);
  // Valid UTF-8 gets no note: a U+FFFD that is really in the file, and a character split across two 64 KiB reads.
  writeFileSync(join(dir, "ok.txt"), `${"a".repeat(64 * 1024 - 1)}é\n\uFFFD\n`);
  r = await call(readTool, { path: "ok.txt" }, ctx);
  assert.equal(r.content, `${"a".repeat(4000)} [… line cut at 4000 chars]\n\uFFFD`);
  writeFileSync(join(dir, "u16.txt"), Buffer.from("\ufeffhello\n", "utf16le"));
  r = await call(readTool, { path: "u16.txt" }, ctx);
  assert.equal(r.errorKind, "failed");
  assert.equal(r.content, "read: u16.txt is UTF-16 text (it starts with a UTF-16 byte-order mark); read shows UTF-8 text only: convert it with bash (e.g. iconv -f UTF-16 -t UTF-8)");
});

void test("edit: an ambiguous old_string names the lines where it occurs", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  writeFileSync(join(dir, "a.txt"), "alpha beta\ngamma beta\n");
  let r = await call(editTool, { path: "a.txt", old_string: "beta", new_string: "B" }, ctx);
  assert.equal(r.content, "edit: old_string occurs 2 times in a.txt (lines 1 and 2); add surrounding context to make it unique, or set replace_all");
  writeFileSync(join(dir, "b.txt"), "x\n\ny\ny\n\ny\ny\ny\ny\ny\n");
  r = await call(editTool, { path: "b.txt", old_string: "y\n", new_string: "z\n" }, ctx);
  assert.equal(r.content, "edit: old_string occurs 7 times in b.txt (lines 3, 4, 6, 7, 8 and 2 more); add surrounding context to make it unique, or set replace_all");
  assert.equal(readFileSync(join(dir, "b.txt"), "utf8"), "x\n\ny\ny\n\ny\ny\ny\ny\ny\n");
});

void test("ls reads a directory entry by entry up to its scan bound: at the bound all are counted, one past it stops and says so", async (t) => {
  const dir = tempDir(t);
  for (const n of ["e", "d", "c", "b"]) writeFileSync(join(dir, n), "");
  mkdirSync(join(dir, "a"));
  const ctx = makeCtx(dir);
  const ls = createLsTool({ maxScan: 5 });
  assert.equal((await call(ls, { limit: 2 }, ctx)).content, "a/\nb\n[3 more entries not shown; raise limit]");
  assert.equal((await call(ls, {}, ctx)).content, "a/\nb\nc\nd\ne");
  writeFileSync(join(dir, "f"), "");
  const r = await call(ls, { limit: 2 }, ctx);
  assert.equal(r.isError, false);
  const lines = r.content.split("\n");
  assert.equal(lines.length, 3);
  assert.deepEqual([...lines.slice(0, 2)].sort(), lines.slice(0, 2), "shown names are sorted");
  assert.equal(lines[2], "[stopped reading after 5 entries: the directory holds more; shown are the first by name among those read; use bash (e.g. find with -name) to look for one]");
});
