/**
 * The web UI's markdown renderer while an answer streams (ui/src/markdown.tsx, docs/ui.md "Long answers"): rendered
 * frame after frame into one component, the page equals a fresh render of the same text at every step, and a frame
 * builds elements only for what the new text can change. In Chromium, without a daemon (test/ui/md-harness.ts).
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { browserSkipReason, launchBrowser, UI_TEST_MS } from "./rig.js";
import { loadHarness } from "./md-harness.js";

const skip = browserSkipReason();

/** Words, wrapped into lines of about 70 characters, `n` characters in all. */
function prose(n: number, seed: number, lineBreaks = true): string {
  const words = ["alpha", "**bold**", "*it*", "`code`", "[ok](https://x.test/a)", "[no](javascript:alert(1))", "<b>raw</b>", "beta", "gamma"];
  let s = "";
  let line = 0;
  let x = seed;
  while (s.length < n) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const w = words[x % words.length]!;
    s += w;
    line += w.length + 1;
    if (lineBreaks && line > 70) {
      s += "\n";
      line = 0;
    } else s += " ";
  }
  return s.slice(0, n).trimEnd();
}

const HEAD = [
  "# Title",
  "Intro with **bold**, *it*, `co\u202ede` and [a link](https://x.test) and [bad](javascript:alert(1)).",
  "",
  "```ts",
  'const a = "s"; // \u0007 c',
  "/* open",
  "```",
  "- one",
  "- two",
  "1. n",
  "2) m",
  "> quote",
  ">more",
  "---",
  "~~~",
  "inside ``` not a close",
  "~~~",
  "text right after",
  "## Sub",
  "```",
  "",
  "",
  "```",
  "",
].join("\n");
const TAIL = ["", "* star\r", "* crlf\r", "", "> q \u2028 sep", "```py", "# comment", "'str", ""].join("\n");
/** A mixed document: blocks of every kind, a paragraph of ~10 kB in lines, one of ~9 kB on one line, an unclosed fence. */
const DOC = HEAD + prose(10_000, 1) + "\n\n" + prose(9_000, 2, false) + "\n" + TAIL + "```";

describe("web UI: markdown rendered while it streams", { skip, timeout: UI_TEST_MS }, () => {
  let browser: Browser;
  let page: Page;
  before(async () => {
    browser = await launchBrowser();
    page = await browser.newPage();
    await loadHarness(page);
  });
  after(async () => browser?.close());

  const check = (srcs: string[]) => page.evaluate(`md.check(${JSON.stringify(srcs)})`);

  test("appended a character, or a chunk, at a time: every frame equals a fresh render of the same text", async () => {
    // Every prefix through the short blocks (each fence opens in one frame and closes in a later one), the start of the
    // first long paragraph and the last blocks; every 97th through the long paragraphs.
    const lens: number[] = [];
    for (let n = 0; n <= DOC.length; n++) if (n <= HEAD.length + 200 || n >= DOC.length - TAIL.length - 20 || n % 97 === 0) lens.push(n);
    assert.equal(await check(lens.map((n) => DOC.slice(0, n))), null);
    // Chunks of 1 to 600 characters, cut anywhere.
    const chunks: string[] = [];
    for (let n = 0, x = 7; n < DOC.length; ) {
      x = (x * 1103515245 + 12345) % 2147483648;
      n = Math.min(DOC.length, n + 1 + (x % 600));
      chunks.push(DOC.slice(0, n));
    }
    assert.equal(await check(["", ...chunks]), null);
  });

  test("text edited rather than appended is rendered from nothing: no block of the old text stays", async () => {
    const edits = [
      DOC,
      DOC.replace("# Title", "# Titel"), // a changed first block
      DOC.slice(0, HEAD.indexOf("/* open")), // cut inside a fence
      DOC.slice(0, HEAD.indexOf("/* open")) + "x\n", // a fence that was closed later, now still open
      DOC.replace("```ts", "```sh"), // a fence's language
      DOC.slice(0, HEAD.length + 5_000).replace("alpha", "- alpha"), // a paragraph that is now a list
      HEAD + prose(10_000, 3), // a long paragraph's runs with other words
      "",
      "- a\n- b",
      "1. a\n- b",
      DOC,
    ];
    assert.equal(await check(edits), null);
  });

  test("a frame builds only what the appended text changes: closed blocks and a long paragraph's runs are reused", async () => {
    // 1,600 blocks, then an answer's next words.
    const blocks = Array.from({ length: 400 }, (_, i) => `## Part ${i}\n\nSome *text* and \`code\` ${i}.\n\n- item\n- item\n\n\`\`\`js\nlet x = ${i};\n\`\`\`\n`).join("\n");
    const long = prose(300_000, 4);
    for (const src of [blocks + "\nThe next", long]) {
      await page.evaluate(`md.step(${JSON.stringify("")})`);
      const first = await page.evaluate<{ made: number }>(`md.step(${JSON.stringify(src)})`);
      const next = await page.evaluate<{ made: number }>(`md.step(${JSON.stringify(src + " words")})`);
      assert.ok(first.made > 1_000, `${first.made} elements for the whole text`);
      // The last block, or a long paragraph's last run (at most ~4 kB): a few hundred at most.
      assert.ok(next.made < 500, `${next.made} elements built to append two words after ${first.made}`);
    }
  });

  test("a growing quote or code block, and a line with no break point, are laid out a section at a time", async () => {
    // A 200 kB quote; 200 kB of code (comments, strings and keywords on every line), then after a 60 kB line; a 60 kB
    // line without a space in prose, a list item or a heading; a 60 kB list item. Appending to each must lay out a bounded tail, not highlight or scan everything again.
    const line = (i: number) => `const v${i} = "s${i}"; /* c */ if (x) return \`t\`; // ${i}\n`;
    let code = "";
    for (let i = 0; code.length < 200_000; i++) code += line(i);
    const word = "x".repeat(60_000);
    const quote = code.replace(/^/gm, "> ").slice(0, 200_000);
    for (const src of [quote, "```ts\n" + code, "```ts\n" + code.slice(0, 40_000) + word + "\n" + code.slice(0, 20_000), word, "intro " + word, "- " + word, "## " + word, "1. " + "a ".repeat(30_000)]) {
      await page.evaluate(`md.step(${JSON.stringify("")})`);
      const first = await page.evaluate<{ made: number; chars: number }>(`md.step(${JSON.stringify(src)})`);
      const next = await page.evaluate<{ made: number; chars: number }>(`md.step(${JSON.stringify(src + "y;\nz")})`);
      assert.ok(first.chars >= src.length * 0.8, `${first.chars} characters laid out for the whole text`);
      // The last section of ~4 kB of dense code (a token every few characters): some hundreds of spans and texts.
      assert.ok(next.made < 2_500, `${next.made} elements built to append a line after ${first.made}`);
      assert.ok(next.chars < 3 * 4096, `${next.chars} characters laid out again to append a line to ${src.length}`);
    }
  });

  test("code, quotes and long lines in sections: every frame equals a fresh render, whatever the chunks", async () => {
    const lines: string[] = [];
    for (let i = 0; lines.join("\n").length < 30_000; i++)
      lines.push(i % 40 === 7 ? "/* a comment that spans" : i % 40 === 9 ? "lines */ let y = 'q';" : `if (a${i}) { s = \`t${i}\`; } // n ${i}\r`);
    const doc = ["```js", ...lines, "z".repeat(9_000) + "\ud83d\ude00".repeat(3_000), "   ```", "", "w".repeat(12_000) + "\r\n" + "v".repeat(5_000), "", ...lines.slice(0, 300).map((l) => `> *q* ${l}`), ">", "", "- " + "i".repeat(9_000), "- " + "*j* ".repeat(3_000), "### " + "h".repeat(5_000) + " *h*", "~~~", "tail"].join("\n");
    const chunks: string[] = [""];
    for (let n = 0, x = 11; n < doc.length; ) {
      x = (x * 1103515245 + 12345) % 2147483648;
      n = Math.min(doc.length, n + 1 + (x % 2_000));
      chunks.push(doc.slice(0, n));
    }
    assert.equal(await check(chunks), null);
    const html = await page.evaluate<string>(`md.fresh(${JSON.stringify(doc)})`);
    assert.doesNotMatch(html, /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]|\ufffd/, "a surrogate pair was split");
    assert.ok(html.includes("tok-keyword"));
  });

  test("a link says where it goes: controls in its text are shown, and text naming another place shows the real one", async () => {
    const src = [
      "[e\u202Egpj.exe](https://files.test/x)", // reads "eexe.jpg"
      "[bank\u200b.test](https://bank.test)",
      "[https://bank.test/login](https://evil.test/login)",
      "[www.bank.test](https://evil.test:8080)",
      "[help@bank.test](mailto:thief@evil.test)",
      "[docs](https://docs.test/a) [docs.test/a](https://www.docs.test/a) [a@b.test](mailto:A@b.test)",
      "[x](javascript:alert(1)) [y](data:text/html,z) [z](https://a[b) <script>alert(1)</script>",
    ].join("\n\n");
    const html = await page.evaluate<string>(`md.fresh(${JSON.stringify(src)})`);
    const links = [...html.matchAll(/<a href="([^"]*)"[^>]*>(.*?)<\/a>/g)].map((m) => [m[1], m[2]]);
    assert.deepEqual(links, [
      ["https://files.test/x", 'e&lt;U+202E&gt;gpj.exe<span class="link-dest"> (files.test)</span>'],
      ["https://bank.test", "bank&lt;U+200B&gt;.test"],
      ["https://evil.test/login", 'https://bank.test/login<span class="link-dest"> (evil.test)</span>'],
      ["https://evil.test:8080", 'www.bank.test<span class="link-dest"> (evil.test)</span>'],
      ["mailto:thief@evil.test", 'help@bank.test<span class="link-dest"> (thief@evil.test)</span>'],
      ["https://docs.test/a", "docs"],
      ["https://www.docs.test/a", "docs.test/a"],
      ["mailto:A@b.test", "a@b.test"],
    ]);
    // Not links: other schemes, a URL the browser cannot parse; and HTML is text.
    assert.ok(html.includes("[x](javascript:alert(1)) [y](data:text/html,z) [z](https://a[b) &lt;script&gt;"), html);
  });

  test("an ordered list keeps its first number: one resumed after a paragraph does not start again at 1", async () => {
    const html = await page.evaluate<string>(`md.fresh(${JSON.stringify("1. first\n2. second\n\nA note.\n\n3. third\n4. fourth\n\nAnother.\n\n0. zero\n\nLast.\n\n1234567890. ten digits\n")})`);
    assert.equal(
      html,
      '<div class="md"><ol><li>first</li><li>second</li></ol><p>A note.</p><ol start="3"><li>third</li><li>fourth</li></ol><p>Another.</p><ol start="0"><li>zero</li></ol><p>Last.</p><ol><li>ten digits</li></ol></div>',
    );
  });

  test("a list whose lines end in \\r (CRLF text) is rendered: the page hung in an endless loop", async () => {
    const html = await page.evaluate<string>(`md.fresh(${JSON.stringify("Steps:\r\n\r\n- one\r\n- two\r\n1. three\u2028four\r\n")})`);
    assert.match(html, /<ul><li>one<\/li><li>two<\/li><\/ul><ol><li>three\u2028four<\/li><\/ol>/);
    // A heading with such a character, or a lone CR, is a heading too (it was a paragraph).
    const heading = await page.evaluate<string>(`md.fresh(${JSON.stringify("# one\u2028two\r\n## three\rfour")})`);
    assert.equal(heading, '<div class="md"><h3>one\u2028two</h3><h4>three\rfour</h4></div>');
  });

  test("CRLF text renders as LF text does: headings, lists, quotes, fences and code (no CR shown), streamed too", async () => {
    const lf = ["# Title", "Some *text*", "on two lines", "", "- a", "- b", "> q", "> r", "```sh", "echo hi", "/* x */", "```", "---", "~~~", "open"].join("\n");
    const crlf = lf.replace(/\n/g, "\r\n");
    const [want, got] = await page.evaluate<[string, string]>(`[md.fresh(${JSON.stringify(lf)}), md.fresh(${JSON.stringify(crlf)})]`);
    assert.match(want, /<h3>Title<\/h3>/);
    assert.equal(got, want);
    // A line's CR arrives in one frame, its LF in the next: each frame equals a fresh render, and every prefix renders
    // as it does without its CRs (so "# Title\r" is a heading, and code shows no CR and no extra line).
    const prefixes = Array.from({ length: crlf.length + 1 }, (_, n) => crlf.slice(0, n));
    assert.equal(await check(prefixes), null);
    const differs = await page.evaluate(`(${JSON.stringify(prefixes)}).find((s) => md.fresh(s) !== md.fresh(s.replace(/\\r/g, ""))) ?? null`);
    assert.equal(differs, null);
  });

  /** The blocks the page shows for `src`, as (tag, text) pairs: rendered whole, or as the live component now shows it. */
  const blocks = (src: string | null): Promise<Array<[string, string]>> =>
    page.evaluate(`(() => {
      const d = document.createElement("div");
      d.innerHTML = ${src === null ? "md.step(md.last).html" : `md.fresh(${JSON.stringify(src)})`};
      return [...d.firstElementChild.children].map((e) => [e.tagName.toLowerCase(), e.textContent]);
    })()`);

  test("code fences follow CommonMark: a fence closes only on its own character, as long, with nothing after it", async () => {
    const cases: Array<[string, string, Array<[string, string]>]> = [
      ["a fence of four backticks holds one of three", "````md\n```js\nlet a = 1;\n```\n````\nafter", [["pre", "```js\nlet a = 1;\n```"], ["p", "after"]]],
      ["```js (an info string) closes no fence", "```md\n# Readme\n```js\nlet a = 1;\n```\nafter", [["pre", "# Readme\n```js\nlet a = 1;"], ["p", "after"]]],
      ["``` closes no ~~~ fence, ~~~ no ``` fence", "~~~\n```\ncode\n```\n~~~\nafter\n```\n~~~\n```\nend", [["pre", "```\ncode\n```"], ["p", "after"], ["pre", "~~~"], ["p", "end"]]],
      ["a closing fence may be followed by spaces and tabs, by nothing else", "```\n``` x\n```  \t \nafter", [["pre", "``` x"], ["p", "after"]]],
      ["a closing fence may be longer, never shorter", "````\n```\n`````\nafter", [["pre", "```"], ["p", "after"]]],
      ["a closing fence is indented 3 spaces at most", "```\n    ```\nstill code\n   ```\nafter", [["pre", "    ```\nstill code"], ["p", "after"]]],
      ["an opening fence is indented 3 spaces at most", "    ```\nprose\n\n   ```\ncode\n```\nafter", [["p", "    ```\nprose"], ["pre", "code"], ["p", "after"]]],
      ["a fence is 3 characters at least", "``\nx\n``\n~~\n\n```\n``\n```\nafter", [["p", "``\nx\n``\n~~"], ["pre", "``"], ["p", "after"]]],
      ["a backtick fence's info string holds no backtick; a tilde fence's may", "``` a`b\nx\n\n~~~ a`b\ny\n~~~\nafter", [["p", "`` ab\nx"], ["pre", "y"], ["p", "after"]]],
      ["an unclosed fence runs to the end of the answer", "```\n```js\nx", [["pre", "```js\nx"]]],
    ];
    for (const [name, src, want] of cases) {
      assert.deepEqual(await blocks(src), want, `${name}: rendered whole`);
      // Streamed a character, then three, at a time: every frame equals a fresh render, and the last shows the same.
      for (const size of [1, 3]) {
        const frames = Array.from({ length: Math.ceil(src.length / size) + 1 }, (_, k) => src.slice(0, k * size));
        assert.equal(await check(["", ...frames, src]), null, `${name} (deltas of ${size})`);
        await page.evaluate(`md.last = ${JSON.stringify(src)}`);
        assert.deepEqual(await blocks(null), want, `${name}: streamed in deltas of ${size}`);
      }
    }
    // While it streams: an inner "```js" shows in the code, whether its line is complete yet or not (then the next,
    // empty so far, is code too).
    assert.deepEqual(await blocks("```md\n# Readme\n```js"), [["pre", "# Readme\n```js"]]);
    assert.deepEqual(await blocks("```md\n# Readme\n```js\n"), [["pre", "# Readme\n```js\n"]]);
  });

  /** The page's HTML for `src` rendered whole, without the code highlighter's spans (`code` their text). */
  const structure = async (src: string): Promise<{ html: string; code: string }> => {
    const html = await page.evaluate<string>(`md.fresh(${JSON.stringify(src)})`);
    return { html: html.replace(/<\/?(span|code)[^>]*>/g, ""), code: html };
  };

  test("fences in list items and quotes, and indented fences: code de-indented and highlighted, where CommonMark puts it", async () => {
    const cases: Array<[string, string, string, string]> = [
      [
        "an ordered item's fence indented 4 spaces: in the item, its code without them, and the list goes on",
        "1. Install it:\n    ```bash\n    npm install berth  # once\n      --global\n    ```\n2. Run it.",
        '<div class="md"><ol><li>Install it:<pre class="code" data-lang="bash">npm install berth  # once\n  --global</pre></li><li>Run it.</li></ol></div>',
        '<span class="tok-comment"># once</span>',
      ],
      [
        "a fence in a nested bullet item (the page's lists are flat: in the last item), then the outer list",
        "- a\n  - b\n    ```js\n    let x = 1;\n    ```\n- c",
        '<div class="md"><ul><li>a</li><li>b<pre class="code" data-lang="js">let x = 1;</pre></li><li>c</li></ul></div>',
        '<span class="tok-keyword">let</span>',
      ],
      [
        "`10. ` and `1.  ` markers, a blank line between an item and its fence, two fences in an item",
        "10. ten\n    ```\n    x\n    ```\n1.  one\n\n    ~~~py\n    y = 2\n    ~~~\n    ```\n    z\n    ```\n\n2. two",
        '<div class="md"><ol start="10"><li>ten<pre class="code">x</pre></li><li>one<pre class="code" data-lang="py">y = 2</pre><pre class="code">z</pre></li><li>two</li></ol></div>',
        '<span class="tok-number">2</span>',
      ],
      [
        "a fence in a block quote: its lines without `> `, closed by a quoted fence; the quote's text around it",
        "> Note:\n> ```js\n> let a = 1;\n>   b\n> ```\n> said\nafter",
        '<div class="md"><blockquote>Note:</blockquote><blockquote><pre class="code" data-lang="js">let a = 1;\n  b</pre></blockquote><blockquote>said</blockquote><p>after</p></div>',
        '<span class="tok-keyword">let</span>',
      ],
      [
        "a quoted fence ends with the quote: a line without `>`",
        "> ```\n> x\nafter\n```\ncode",
        '<div class="md"><blockquote><pre class="code">x</pre></blockquote><p>after</p><pre class="code">code</pre></div>',
        "x",
      ],
      [
        "a top-level fence indented 2 spaces: its lines lose up to 2 spaces",
        "  ```py\n  x = 1\n    y\n z\n  ```\nafter",
        '<div class="md"><pre class="code" data-lang="py">x = 1\n  y\nz</pre><p>after</p></div>',
        '<span class="tok-number">1</span>',
      ],
      [
        "still text: a fence 4 spaces past an item's content, or after the list ended",
        "- a\n       ```\nb\n    ```\nc",
        '<div class="md"><ul><li>a</li></ul><p>       ```\nb\n    ```\nc</p></div>',
        "b",
      ],
    ];
    for (const [name, src, want, styled] of cases) {
      const got = await structure(src);
      assert.equal(got.html, want, name);
      assert.ok(got.code.includes(styled), `${name}: ${got.code}`);
      // Streamed a character at a time, and CRLF: every frame equals a fresh render; the last shows the same.
      const frames = Array.from({ length: src.length + 1 }, (_, n) => src.slice(0, n));
      assert.equal(await check(["", ...frames]), null, `${name} (streamed)`);
      assert.equal((await page.evaluate<{ html: string }>(`md.step(${JSON.stringify(src)})`)).html, got.code, name);
      assert.equal((await structure(src.replace(/\n/g, "\r\n"))).html, want, `${name} (CRLF)`);
    }
  });

  test("hostile: quoted fences opening and closing, and a fence deep in a list, stream a bounded frame at a time", async () => {
    const deep = Array.from({ length: 1_000 }, (_, i) => " ".repeat(2 * i) + "- x").join("\n");
    // Quoted fences that close, one that never does (its code in sections), and a fence 2,000 columns deep in a list.
    const srcs = ["> ```\n".repeat(20_000), "> ```js\n> let a;\n> ```\n".repeat(7_000), "> ```js\n" + "> let a;\n".repeat(20_000), deep + "\n" + " ".repeat(2_000) + "```\n" + "a;\n".repeat(50_000)];
    for (const src of srcs) {
      await page.evaluate(`md.step(${JSON.stringify("")})`);
      const first = await page.evaluate<{ made: number; chars: number }>(`md.step(${JSON.stringify(src)}, false)`);
      const next = await page.evaluate<{ made: number; chars: number }>(`md.step(${JSON.stringify(src + "> a\n")}, false)`);
      const lines = src.split("\n").length;
      assert.ok(first.made <= 12 * lines, `${first.made} elements for ${lines} lines`);
      // At most the last section of ~4 kB of code (a token every few characters), as for any long block.
      assert.ok(next.made < 2_500, `${next.made} elements built to append a line after ${first.made}`);
      assert.ok(next.chars < 3 * 4096, `${next.chars} characters laid out again to append a line to ${src.length}`);
    }
  });
});
