/**
 * The user documentation's links (README.md and docs/*.md): a fresh clone has only these to learn from, so every
 * relative link must name a file of the repository and, with `#anchor`, a heading of that file (GitHub's anchor
 * rules), and no link may leave the repository (docs never link outside it). Links inside code are not links.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { REPO_ROOT } from "../helpers/paths.js";

/** The prose of a markdown file: fenced blocks and inline code spans blanked, line numbers kept. */
function prose(text: string): string[] {
  let fence: string | undefined;
  return text.split("\n").map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (open !== null && open[1]![0] === fence[0] && open[1]!.length >= fence.length) fence = undefined;
      return "";
    }
    if (open !== null) {
      fence = open[1]!;
      return "";
    }
    return line.replace(/(`+)[\s\S]*?\1/g, "");
  });
}

/** GitHub's anchors for a file's headings: lowercased, punctuation dropped, spaces to `-`, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== undefined) {
      if (open !== null && open[1]![0] === fence[0] && open[1]!.length >= fence.length) fence = undefined;
      continue;
    }
    if (open !== null) {
      fence = open[1]!;
      continue;
    }
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h === null) continue;
    const slug = h[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

function docFiles(): string[] {
  const docs = join(REPO_ROOT, "docs");
  return [
    join(REPO_ROOT, "README.md"),
    ...readdirSync(docs)
      .filter((n) => n.endsWith(".md"))
      .sort()
      .map((n) => join(docs, n)),
  ];
}

const LINK = /!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g;

test("every link in README.md and docs/*.md resolves to a file and heading of the repository", () => {
  const problems: string[] = [];
  let checked = 0;
  for (const file of docFiles()) {
    const where = relative(REPO_ROOT, file);
    prose(readFileSync(file, "utf8")).forEach((line, i) => {
      for (const m of line.matchAll(LINK)) {
        const target = m[1]!;
        const at = `${where}:${i + 1}: (${target})`;
        checked++;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) {
          problems.push(`${at} leaves the repository; docs never link outside it`);
          continue;
        }
        const hash = target.indexOf("#");
        const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
        const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
        const dest = path === "" ? file : resolve(dirname(file), path);
        if (relative(REPO_ROOT, dest).startsWith("..")) {
          problems.push(`${at} points outside the repository`);
          continue;
        }
        if (!existsSync(dest)) {
          problems.push(`${at} names no file of the repository`);
          continue;
        }
        if (anchor === undefined) continue;
        if (statSync(dest).isDirectory() || !dest.endsWith(".md")) {
          problems.push(`${at} has an anchor, but its target is not a markdown file`);
          continue;
        }
        if (!anchors(readFileSync(dest, "utf8")).has(anchor)) {
          problems.push(`${at} names no heading of ${relative(REPO_ROOT, dest)}`);
        }
      }
    });
  }
  assert.ok(checked > 20, `only ${checked} links found: is the link pattern still right?`);
  assert.deepEqual(problems, []);
});

test("the anchor rules follow GitHub's for the headings the docs use", () => {
  const a = anchors(
    [
      "# Security",
      "## `daemon.control`",
      "## Berth's runtime as a backend",
      "## Tool policy: confinement, protected state, the bash sandbox",
      "```",
      "# not a heading",
      "```",
      "## Security",
    ].join("\n"),
  );
  assert.deepEqual(
    [...a],
    ["security", "daemoncontrol", "berths-runtime-as-a-backend", "tool-policy-confinement-protected-state-the-bash-sandbox", "security-1"],
  );
});
