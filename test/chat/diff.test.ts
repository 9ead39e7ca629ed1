/**
 * The approval card's unified diff (diff.ts): its format (hunks, context, `/dev/null` for a new file, removed lines
 * before added ones), a minimal and correct edit script on random inputs (checked against a reference LCS), and the
 * bounds: a file past 2,000 lines or a change past `MAX_DIFF_EDITS` lines is summarised on the card, not diffed.
 * Its speed at the bounds is measured in bench/diff.bench.ts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { approvalCard } from "../../src/cli/chat/approval.js";
import { MAX_DIFF_EDITS, MAX_DIFF_LINES, unifiedDiff } from "../../src/cli/chat/diff.js";

const GREET = 'def greet(name):\n    print("Hello " + name)\n\ngreet("world")\n';

/** `before` with the diff's hunks applied. */
function apply(before: string, diff: string): string {
  const a = before === "" ? [] : before.replace(/\n$/, "").split("\n");
  const out: string[] = [];
  let i = 0;
  for (const l of diff.replace(/\n$/, "").split("\n").slice(2)) {
    const h = /^@@ -(\d+),(\d+) /.exec(l);
    if (h !== null) {
      const to = Number(h[2]) === 0 ? Number(h[1]) : Number(h[1]) - 1;
      while (i < to) out.push(a[i++]!);
    } else if (l.startsWith(" ")) out.push(a[i++]!);
    else if (l.startsWith("-")) i++;
    else out.push(l.slice(1));
  }
  while (i < a.length) out.push(a[i++]!);
  return out.length === 0 ? "" : out.join("\n") + "\n";
}

function lcs(a: string[], b: string[]): number {
  const t: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) t[i]![j] = a[i] === b[j] ? t[i + 1]![j + 1]! + 1 : Math.max(t[i + 1]![j]!, t[i]![j + 1]!);
  return t[0]![0]!;
}

describe("approval card diff", () => {
  it("shows hunks with three lines of context, a new file against /dev/null, removals before additions", () => {
    assert.equal(
      unifiedDiff(GREET, GREET.replace('print("Hello " + name)', 'print(f"Hello, {name}!")'), "greet.py"),
      ["--- a/greet.py", "+++ b/greet.py", "@@ -1,4 +1,4 @@", " def greet(name):", '-    print("Hello " + name)', '+    print(f"Hello, {name}!")', " ", ' greet("world")', ""].join("\n"),
    );
    assert.equal(unifiedDiff("", "a\nb\n", "new.txt"), "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    assert.equal(unifiedDiff("a\nb\n", "", "gone.txt"), "--- a/gone.txt\n+++ b/gone.txt\n@@ -1,2 +0,0 @@\n-a\n-b\n");
    const long = Array.from({ length: 20 }, (_, i) => `l${i}`).join("\n") + "\n";
    const two = long.replace("l2\n", "two\n").replace("l17\n", "seventeen\n");
    assert.equal(
      unifiedDiff(long, two, "f"),
      ["--- a/f", "+++ b/f", "@@ -1,6 +1,6 @@", " l0", " l1", "-l2", "+two", " l3", " l4", " l5", "@@ -15,6 +15,6 @@", " l14", " l15", " l16", "-l17", "+seventeen", " l18", " l19", ""].join("\n"),
    );
  });

  it("is a shortest edit script that turns the old text into the new one (random inputs)", () => {
    let seed = 7;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let t = 0; t < 3000; t++) {
      const a = Array.from({ length: rnd(25) }, () => "abcd"[rnd(4)]!);
      const b = Array.from({ length: rnd(25) }, () => "abcd"[rnd(4)]!);
      const before = a.map((l) => l + "\n").join("");
      const after = b.map((l) => l + "\n").join("");
      const d = unifiedDiff(before, after, "f")!;
      assert.equal(apply(before, d), after, JSON.stringify({ a, b, d }));
      const changed = d.split("\n").slice(2).filter((l) => l.startsWith("-") || l.startsWith("+")).length;
      assert.equal(changed, a.length + b.length - 2 * lcs(a, b), JSON.stringify({ a, b, d }));
      assert.doesNotMatch(d, /\n\+[^\n]*\n-/, "a removal never follows an addition");
    }
  });

  it("gives up past its bounds, and the card says which", async () => {
    const n = MAX_DIFF_LINES;
    const file = Array.from({ length: n }, (_, i) => `line ${i}`).join("\n") + "\n";
    // Every other line replaced: 2,000 changed lines, past MAX_DIFF_EDITS.
    const rewritten = Array.from({ length: n }, (_, i) => (i % 2 === 0 ? `new ${i}` : `line ${i}`)).join("\n") + "\n";
    assert.ok(n > MAX_DIFF_EDITS);
    assert.equal(unifiedDiff(file, rewritten, "big.txt"), null);
    // One line changed in the same file is diffed; a file one line longer than the bound is not.
    assert.match(unifiedDiff(file, file.replace("line 1000\n", "changed\n"), "big.txt")!, /^@@ -998,7 \+998,7 @@$/m);
    assert.equal(unifiedDiff(file + "one more\n", file, "big.txt"), null);

    const cwd = mkdtempSync(join(tmpdir(), "berth-diff-"));
    writeFileSync(join(cwd, "big.txt"), file);
    const card = (args: Record<string, unknown>, name: string): Promise<string> => approvalCard({ name, arguments: args, cwd, summary: "", risk: "write" });
    assert.equal(await card({ path: "big.txt", content: rewritten }, "write"), `write big.txt (overwrite): ${Buffer.byteLength(rewritten)} bytes (too many changes to diff)`);
    assert.equal(await card({ path: "big.txt", old_string: "line", new_string: "LINE", replace_all: true }, "edit"), "edit big.txt (too many changes to diff)");
    writeFileSync(join(cwd, "big.txt"), file + "one more\n");
    assert.equal(await card({ path: "big.txt", old_string: "one more", new_string: "two" }, "edit"), "edit big.txt (too long to diff)");
  });
});
