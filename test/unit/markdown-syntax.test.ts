/**
 * The markdown and code syntax both renderers share (core/markdown-syntax.ts): `codeTokens` gives exactly the
 * tokens of the regular expressions the renderers used before (the reference, below), for every short input over
 * the characters that matter, and stays linear where those rescanned the rest of the text from every unclosed
 * opening (a hostile answer of megabytes renders; the quadratic scans took hours on these). `LINK` keeps the links
 * a reader expects and matches none in unclosed brackets.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomStrings } from "../helpers/prng.js";
import { codeTokens, INLINE_SPANS, LINK, type CodeDialect, type CodeToken } from "../../src/core/markdown-syntax.js";
import { renderMarkdown } from "../../src/cli/chat/markdown.js";

// The web UI's dialects (ui/src/markdown.tsx) and the terminal's (cli/chat/markdown.ts).
const WEB_NUMBER = /\d[\d_.xXa-fA-F]*\b/y;
const WEB_WORD = /[A-Za-z_$][\w$]*/y;
const web = (hashLang: boolean): CodeDialect => ({ hash: hashLang ? "comment" : "plain", slash: true, backtick: true, number: WEB_NUMBER, word: WEB_WORD });
const TERM_NUMBER = /\d+(?:\.\d+)?\b/y;
const TERM_WORD = /[A-Za-z_]\w*/y;
const TERM_HASH: CodeDialect = { hash: "comment", slash: false, backtick: false, number: TERM_NUMBER, word: TERM_WORD };
const TERM_C: CodeDialect = { hash: "none", slash: true, backtick: true, number: TERM_NUMBER, word: TERM_WORD };

/** The tokens of one of the regular expressions the renderers used before, as `codeTokens` reports them. */
function reference(re: RegExp, code: string, hashKind: "comment" | "plain"): CodeToken[] {
  const out: CodeToken[] = [];
  re.lastIndex = 0;
  for (let m = re.exec(code); m !== null; m = re.exec(code)) {
    const kind = m[1] !== undefined ? (m[1].startsWith("#") ? hashKind : "comment") : m[2] !== undefined ? "string" : m[3] !== undefined ? "number" : "word";
    out.push({ kind, start: m.index, end: m.index + m[0].length });
  }
  return out;
}
const WEB_RE = /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\b\d[\d_.xXa-fA-F]*\b)|([A-Za-z_$][\w$]*)/g;
const TERM_HASH_RE = /(#.*$)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(\b\d+(?:\.\d+)?\b)|([A-Za-z_]\w*)/g;
const TERM_C_RE = /(\/\/.*$|\/\*.*?\*\/)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\b\d+(?:\.\d+)?\b)|([A-Za-z_]\w*)/g;

const ALPHABET = "\"'`/*#\\ \nax_$1.9e";

describe("codeTokens", () => {
  it("tokenizes comments, strings, numbers and words as the web UI's expression did, for 40,000 inputs", () => {
    for (const hashLang of [false, true]) {
      for (const code of randomStrings(20_000, 24, ALPHABET, hashLang ? 7 : 3)) {
        assert.deepEqual(codeTokens(code, web(hashLang)), reference(WEB_RE, code, hashLang ? "comment" : "plain"), JSON.stringify(code));
      }
    }
  });

  it("tokenizes a line as the terminal's expressions did, for 40,000 inputs", () => {
    const line = ALPHABET.replace("\n", "");
    for (const code of randomStrings(20_000, 24, line, 11)) assert.deepEqual(codeTokens(code, TERM_HASH), reference(TERM_HASH_RE, code, "comment"), JSON.stringify(code));
    for (const code of randomStrings(20_000, 24, line, 13)) assert.deepEqual(codeTokens(code, TERM_C), reference(TERM_C_RE, code, "comment"), JSON.stringify(code));
  });

  it("names each construct in a sample", () => {
    const code = 'const s = "a\\"b"; // note\n/* block\n */ let t = `x\n${1}`; # not here\nn = 0x1f';
    const kinds = codeTokens(code, web(false)).map((t) => `${t.kind}:${code.slice(t.start, t.end)}`);
    assert.deepEqual(kinds, [
      "word:const",
      "word:s",
      'string:"a\\"b"',
      "comment:// note",
      "comment:/* block\n */",
      "word:let",
      "word:t",
      "string:`x\n${1}`",
      "plain:# not here",
      "word:n",
      "number:0x1f",
    ]);
  });

  it("stays linear on megabytes of unclosed openings (each used to rescan the rest of the text)", () => {
    const cases: Array<[string, CodeDialect]> = [
      ["/* ".repeat(400_000), web(false)],
      ['"\\'.repeat(600_000), web(false)],
      ["'\\".repeat(600_000), TERM_HASH],
      ["`\\".repeat(600_000), web(false)],
      ['"\\'.repeat(600_000), TERM_C],
    ];
    for (const [code, dialect] of cases) assert.deepEqual(codeTokens(code, dialect), [], JSON.stringify(code.slice(0, 6)));
    // One closing at the very end: the first opening takes everything up to it.
    const closed = "/* ".repeat(400_000) + "*/";
    assert.deepEqual(codeTokens(closed, web(false)), [{ kind: "comment", start: 0, end: closed.length }]);
  });
});

describe("LINK and INLINE_SPANS", () => {
  const links = (s: string): string[] => [...s.matchAll(new RegExp(LINK, "g"))].map((m) => `${m[1]!} -> ${m[2]!}`);

  it("keeps the links a reader expects", () => {
    assert.deepEqual(links("see [the docs](https://example.invalid/docs) and [b](u)"), ["the docs -> https://example.invalid/docs", "b -> u"]);
    // The innermost bracket pair is the link (CommonMark), and a URL's balanced parentheses stay in it.
    assert.deepEqual(links("[a [b](u)"), ["b -> u"]);
    assert.deepEqual(links("[Foo](https://en.wikipedia.org/wiki/Foo_(bar)) then"), ["Foo -> https://en.wikipedia.org/wiki/Foo_(bar)"]);
    assert.deepEqual(links("[x](has space) [y](no-close"), []);
  });

  it("matches spans in priority order", () => {
    const spans = [..."`c` [l](u) **b** __d__ *e* _f_".matchAll(new RegExp(INLINE_SPANS, "g"))].map((m) => m.slice(1).findIndex((g) => g !== undefined) + 1);
    assert.deepEqual(spans, [1, 2, 4, 5, 6, 7]);
  });

  it("stays linear on megabytes of unclosed brackets", () => {
    for (const s of ["[a](".repeat(300_000), "[".repeat(1_000_000), "[a](b(".repeat(200_000)]) {
      assert.deepEqual(links(s), []);
      assert.equal(new RegExp(INLINE_SPANS, "g").test(s), false);
    }
  });

  it("the terminal renderer shows such an answer as its text", () => {
    const answer = "[a](".repeat(100_000);
    assert.equal(renderMarkdown(answer, true), answer + "\n");
    const code = ["```c", "/* ".repeat(100_000), '"\\'.repeat(100_000), "`\\".repeat(100_000), "```"].join("\n");
    const lines = renderMarkdown(code, true).split("\n");
    assert.equal(lines.length, 6);
    for (const l of lines.slice(1, 4)) assert.ok(!l.includes("\x1b[2;3m") && !l.includes("\x1b[32m"), "no comment or string colour on unclosed openings");
  });
});
