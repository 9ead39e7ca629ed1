/**
 * The terminal markdown renderer against hostile model output (a prompt-injected model quoting a file it read):
 * line endings, terminal controls, links that claim to go elsewhere, bounded work, and table alignment, as the
 * screen of a terminal emulator shows them (`renderMarkdown` for `-p`, and the interactive chat's event handler,
 * live answer and screen).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MAX_CODE_INDENT, MAX_COLUMN_WIDTH, MarkdownStream, renderMarkdown } from "../../src/cli/chat/markdown.js";
import { turnEvents } from "../../src/cli/chat/turn-events.js";
import { liveAnswerOn } from "./live-rig.js";
import { VTerm } from "./vterm.js";

/** Any control a terminal would act on, but the renderer's own SGR styling: C0 but tab/newline, DEL, C1, bidi. */
const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
const unstyled = (s: string): string => s.replace(/\x1b\[[0-9;]*m/g, "");

/** What a terminal shows for `text` written to it (a pseudo-terminal turns "\n" into "\r\n"). */
async function shown(text: string, cols = 100): Promise<string[]> {
  return new VTerm(cols, 30).lines(text.replace(/\n/g, "\r\n"));
}

/** The interactive chat's answer path: SCV `assistant.delta` events through the turn's handler to a terminal. */
function chatAnswer(cols: number, rows: number) {
  const { out, screen, answer } = liveAnswerOn(cols, rows);
  const host = {
    write: (t: string) => screen.write(t),
    line: (t: string) => screen.line(t),
    status: (t: string) => screen.line(t),
    atLineStart: () => screen.atLineStart,
    bold: (t: string) => t,
    autoApproves: () => true,
    ask: () => Promise.resolve(true),
    resolveApproval: () => {},
    context: () => {},
  };
  const onEvent = turnEvents(host, { id: "s", cwd: "/", model: null, ctxMax: null }, answer);
  const vt = new VTerm(cols, rows);
  return {
    out,
    screen,
    stream: (deltas: string[]) => {
      for (const d of deltas) onEvent({ type: "assistant.delta", content: d });
    },
    complete: (content: string) => onEvent({ type: "assistant.completed", content }),
    lines: () => vt.lines(out.text),
  };
}

describe("terminal markdown: line endings and controls", () => {
  const LF = ["# Title", "Some *text*", "", "- a", "1. b", "> q", "| h | i |", "|---|---|", "| c | d |", "```sh", "echo hi", "```", "---", "~~~", "open"].join("\n");

  it("CRLF and lone-CR text renders as LF text does (headings, lists, quotes, tables, fences); no CR is written", () => {
    for (const color of [true, false]) {
      const want = renderMarkdown(LF, color);
      assert.match(want, color ? /^\x1b\[1;4mTitle\x1b\[22;24m\n/ : /^Title\n/);
      assert.equal(renderMarkdown(LF.replace(/\n/g, "\r\n") + "\r\n", color), want);
      assert.equal(renderMarkdown(LF.replace(/\n/g, "\r"), color), want);
      // Line by line, as the interactive chat feeds it (its lines split at LF keep a CRLF's CR).
      const md = new MarkdownStream(color);
      const got = [...LF.split("\n").flatMap((l) => md.push(l + "\r")), ...md.flush()].join("\n") + "\n";
      assert.equal(got, want);
      assert.doesNotMatch(got, /\r/);
    }
  });

  it("escape sequences, BS, VT, FF, C1 and bidi controls are shown, never obeyed, in every construct", async () => {
    const c = "\x1b]0;owned\x07\x1b[2J\b\v\f\x9b2K\u202e";
    const shownC = "^[]0;owned^G^[[2J^H^K^L<U+009B>2K<U+202E>";
    // In a link the controls but ESC (its caret form `^[` holds a bracket, which no link text holds).
    const l = "\b\v\f\x9b2K\u202e";
    const shownL = "^H^K^L<U+009B>2K<U+202E>";
    const doc = [`# h${c}`, `p${c} **b${c}**`, `- l${c}`, `> q${c}`, `| t${c} | u |`, "|---|---|", `| v | w${c} |`, `[x${l}](https://u.example/${l})`, `\`k${c}\``, "```sh", `code${c}`, "```", ""].join("\n");
    for (const color of [true, false]) {
      const out = renderMarkdown(doc, color);
      assert.doesNotMatch(unstyled(out), RAW_CONTROL, JSON.stringify(out));
      const lines = await shown(out);
      for (const want of [`h${shownC}`, `p${shownC} b${shownC}`, `• l${shownC}`, `▌ q${shownC}`, `\`k${shownC}\``, `  │ code${shownC}`]) {
        if (color && want.startsWith("`")) continue;
        assert.ok(lines.includes(want), `${want}\n${lines.join("\n")}`);
      }
      assert.ok(lines.some((l) => l.startsWith(`t${shownC} │ u`)), lines.join("\n"));
      assert.ok(lines.some((l) => l.startsWith(`x${shownL} (https://u.example/${shownL})`)), lines.join("\n"));
    }
  });

  it("interactive: a CR cannot overwrite what the answer showed; CRLF and lone CRs end lines, in any deltas", async () => {
    const text = "ok\r\n# Title\r\nsafe command\rrm -rf ~\n10%\r20%\r100%\r\n| a | b |\r\n|---|---|\r\n| c | d |\r\nend";
    for (const size of [1, 2, 5]) {
      const t = chatAnswer(60, 20);
      t.stream(text.match(new RegExp(`[\\s\\S]{1,${size}}`, "g"))!);
      t.complete(text);
      assert.deepEqual(await t.lines(), ["ok", "Title", "safe command", "rm -rf ~", "10%", "20%", "100%", "a │ b", "──┼──", "c │ d", "end"]);
      t.screen.stop();
    }
  });
});

describe("terminal markdown: links", () => {
  const plain = (md: string): string => renderMarkdown(md, false).replace(/\n$/, "");

  it("a link's URL is shown as written: emphasis markers in it are not emphasis, nor pair with ones after it", async () => {
    assert.equal(plain("[docs](https://x.example/__init__/a_b_/c) and [x](https://a.example/*b*)"), "docs (https://x.example/__init__/a_b_/c) and x (https://a.example/*b*)");
    assert.equal(plain("[a](https://evil.example/**) and **bold**"), "a (https://evil.example/**) and bold");
    assert.equal(plain("*see [a](https://a.example/_x_)*"), "see a (https://a.example/_x_)");
    const color = renderMarkdown("[docs](https://x.example/__init__)", true);
    assert.equal(color, "\x1b[4mdocs\x1b[24m\x1b[2m (https://x.example/__init__)\x1b[22m\n");
    assert.deepEqual(await shown(color), ["docs (https://x.example/__init__)"]);
  });

  it("a link says where it goes: hidden characters are shown, and text naming another place names the real one", () => {
    const cases: Array<[string, string]> = [
      ["[e\u202egpj.exe](https://files.example/x)", "e<U+202E>gpj.exe (https://files.example/x, goes to files.example)"],
      ["[bank\u200b.example](https://bank.example)", "bank<U+200B>.example (https://bank.example)"],
      ["[https://bank.example/login](https://evil.example/login)", "https://bank.example/login (https://evil.example/login, goes to evil.example)"],
      ["[https://bank.example](https://bank.example@evil.example/)", "https://bank.example (https://bank.example@evil.example/, goes to evil.example)"],
      ["[www.bank.example](https://evil.example:8080)", "www.bank.example (https://evil.example:8080, goes to evil.example)"],
      ["[help@bank.example](mailto:thief@evil.example)", "help@bank.example (mailto:thief@evil.example, goes to thief@evil.example)"],
      ["[x](https://evil.example/\u200b\u2060)", "x (https://evil.example/<U+200B><U+2060>)"],
      // Text that is no place, or the same place, is left as it is; the URL itself (or an address) is shown once.
      ["[the docs](https://docs.example/a)", "the docs (https://docs.example/a)"],
      ["[docs.example/a](https://www.docs.example/a)", "docs.example/a (https://www.docs.example/a)"],
      ["[https://x.example/a](https://x.example/a)", "https://x.example/a"],
      ["[a@b.example](mailto:a@b.example)", "a@b.example"],
      ["[x](javascript:alert(1))", "x (javascript:alert(1))"],
    ];
    for (const [md, want] of cases) assert.equal(plain(md), want, md);
  });
});

describe("terminal markdown: lines with separators", () => {
  it("a line holding U+2028 or U+2029 is still a heading, an item or a table row (they were paragraphs)", () => {
    const out = renderMarkdown("# a\u2028b\n- c\u2029d\n1. e\u2028f\n| g\u2028h | i |\n|---|---|\n| j | k |\n", false);
    assert.equal(out, "a\u2028b\n• c\u2029d\n1. e\u2028f\ng\u2028h │ i\n────┼──\nj   │ k\n");
  });
});

describe("terminal markdown: table alignment", () => {
  it("tabs, wide characters and emoji in cells keep every row's column separator in one screen column", async () => {
    const md = "| a\tb | 漢字 |\n|---|---|\n| xxxxxxxxxxxx | 🙂 |\n| 한국\tx | ｆｕｌｌ |\n| `c\td` | e |\n";
    for (const color of [true, false]) {
      const out = renderMarkdown(md, color);
      const cols = (await new VTerm(80, 10).columnsOf(out.replace(/\n/g, "\r\n"), "│")).filter((c) => c.length > 0);
      assert.equal(cols.length, 4, out);
      assert.deepEqual(new Set(cols.map((c) => c.join())).size, 1, `${JSON.stringify(cols)}\n${out}`);
      assert.doesNotMatch(out, /\t/);
    }
  });
});

describe("terminal markdown: bounded work", () => {
  it(`a column is padded to its widest cell up to ${MAX_COLUMN_WIDTH} columns; a wider cell moves only its own row`, async () => {
    const bars = async (width: number): Promise<number[][]> => {
      const md = `| h | i |\n|---|---|\n| ${"x".repeat(width)} | j |\n| k | l |\n`;
      return (await new VTerm(300, 10).columnsOf(renderMarkdown(md, false).replace(/\n/g, "\r\n"), "│")).filter((c) => c.length > 0);
    };
    assert.deepEqual(await bars(MAX_COLUMN_WIDTH), [[MAX_COLUMN_WIDTH + 1], [MAX_COLUMN_WIDTH + 1], [MAX_COLUMN_WIDTH + 1]]);
    assert.deepEqual(await bars(MAX_COLUMN_WIDTH + 1), [[MAX_COLUMN_WIDTH + 1], [MAX_COLUMN_WIDTH + 2], [MAX_COLUMN_WIDTH + 1]]);
  });

  it("hostile shapes render, each in output bounded by its input (no stack overflow, no row × column padding)", () => {
    const inputs = {
      "1 MB table row": "| a | b |\n|---|---|\n| " + "x".repeat(1 << 20) + " | y |\n| z | w |\n",
      "100k backticks": "`".repeat(100_000) + "\n" + "`a".repeat(50_000) + "\n",
      "10,000-deep list and quote": " ".repeat(20_000) + "- x\n" + "> ".repeat(10_000) + "q\n" + Array.from({ length: 500 }, (_, i) => " ".repeat(i) + "- y").join("\n"),
      "unclosed fence": "```js\n" + "/* \"x' `[a](\n".repeat(20_000),
      "10,000 columns": "|" + "c|".repeat(10_000) + "\n|" + "-|".repeat(10_000) + "\n" + "|d|\n".repeat(1000),
      "100k links": "[a.example](https://b.example/_x_)".repeat(100_000) + "\n",
      "100k CRs": "a\r".repeat(100_000),
      "bare URLs of punctuation": "https://" + ".".repeat(400_000) + " " + "https://__ ".repeat(40_000),
      // One wide cell above many short rows: each row was padded to its width (10 GB here, more than a string holds).
      "1 MB cell above 10,000 rows": "| " + "x".repeat(1 << 20) + " | y |\n" + "| a | b |\n".repeat(10_000),
    };
    for (const [name, md] of Object.entries(inputs)) {
      const out = renderMarkdown(md, true);
      const lines = md.split(/\r\n?|\n/).length;
      // Styling, a code line's gutter, a link's parentheses and "goes to": a few bytes a line, three a character.
      assert.ok(out.length <= 3 * md.length + 40 * lines, `${name}: ${out.length} bytes out of ${md.length}`);
      assert.ok(out.length >= md.length / 2, name);
    }
  });
});

describe("terminal markdown: bare URLs", () => {
  it("a bare URL is shown as written: emphasis markers in it are not emphasis; emphasis around it still is", () => {
    const md = "see https://x.example/pkg/__init__.py, https://y.example/_b_/c and **https://z.example/*a*/**, or _https://w.example/_";
    assert.equal(renderMarkdown(md, false), "see https://x.example/pkg/__init__.py, https://y.example/_b_/c and https://z.example/*a*/, or https://w.example/\n");
    assert.equal(renderMarkdown("**https://z.example/_a_/**", true), "\x1b[1mhttps://z.example/_a_/\x1b[22m\n");
    // In a link's text (underlined) the URL ends where the styling starts.
    assert.equal(renderMarkdown("[https://a.example/_x_](https://a.example/_x_/y)", true), "\x1b[4mhttps://a.example/_x_\x1b[24m\x1b[2m (https://a.example/_x_/y)\x1b[22m\n");
  });
});

describe("terminal markdown: code fences (CommonMark's opening and closing rules)", () => {
  /** Markdown, and the screen it shows (no colour: a fence is `┌─ lang`, its lines `│ …`, its end `└─`). */
  const cases: Array<[string, string, string[]]> = [
    ["a fence of four backticks holds one of three", "````md\n```js\nlet a = 1;\n```\n````\nafter", ["  ┌─ md", "  │ ```js", "  │ let a = 1;", "  │ ```", "  └─", "after"]],
    ["```js (an info string) closes no fence", "```md\n# Readme\n```js\nlet a = 1;\n```\nafter", ["  ┌─ md", "  │ # Readme", "  │ ```js", "  │ let a = 1;", "  └─", "after"]],
    ["``` closes no ~~~ fence, ~~~ no ``` fence", "~~~\n```\ncode\n```\n~~~\nafter\n```\n~~~\n```\nend", ["  ┌─", "  │ ```", "  │ code", "  │ ```", "  └─", "after", "  ┌─", "  │ ~~~", "  └─", "end"]],
    ["a closing fence may be followed by spaces and tabs, by nothing else", "```\n``` x\n```  \t \nafter", ["  ┌─", "  │ ``` x", "  └─", "after"]],
    ["a closing fence may be longer, never shorter", "````\n```\n`````\nafter", ["  ┌─", "  │ ```", "  └─", "after"]],
    ["a closing fence is indented 3 spaces at most", "```\n    ```\nstill code\n   ```\nafter", ["  ┌─", "  │     ```", "  │ still code", "  └─", "after"]],
    ["an opening fence is indented 3 spaces at most", "    ```\nprose\n\n   ```\ncode\n```\nafter", ["    ```", "prose", "", "  ┌─", "  │ code", "  └─", "after"]],
    ["a fence is 3 characters at least", "``\nx\n``\n~~\n```\n``\n```\nafter", ["``", "x", "``", "~~", "  ┌─", "  │ ``", "  └─", "after"]],
    ["a backtick fence's info string holds no backtick; a tilde fence's may", "``` a`b\nx\n~~~ a`b\ny\n~~~\nafter", ["``` a`b", "x", "  ┌─ a", "  │ y", "  └─", "after"]],
    ["an unclosed fence runs to the end of the answer", "```\n```js\nx", ["  ┌─", "  │ ```js", "  │ x"]],
  ];

  it("whole (-p): every case shows its code and prose where they are", async () => {
    for (const [name, md, want] of cases) assert.deepEqual(await shown(renderMarkdown(md, false)), want, name);
  });

  it("interactive: the same screens, streamed a character, three, or all at once per delta", async () => {
    for (const [name, md, want] of cases)
      for (const size of [1, 3, md.length]) {
        const t = chatAnswer(60, 40);
        t.stream(md.match(new RegExp(`[\\s\\S]{1,${size}}`, "g"))!);
        t.complete(md);
        assert.deepEqual(await t.lines(), want, `${name} (deltas of ${size})`);
        t.screen.stop();
      }
  });
});

describe("terminal markdown: code fences in list items and quotes, and indented fences", () => {
  /** Markdown, the screen it shows without colour, and a line of code and its styled form with colour. */
  const cases: Array<[string, string, string[], [string, string]]> = [
    [
      "an ordered item's fence indented 4 spaces: its code loses them, and the list goes on after it",
      "1. Install it:\n    ```bash\n    npm install berth  # once\n      --global\n    ```\n2. Run it.",
      ["1. Install it:", "     ┌─ bash", "     │ npm install berth  # once", "     │   --global", "     └─", "2. Run it."],
      ["# once", "\x1b[2;3m# once\x1b[22;23m"],
    ],
    [
      "a fence in a nested bullet item, then the outer list",
      "- a\n  - b\n    ```js\n    let x = 1;\n    ```\n- c",
      ["• a", "  • b", "      ┌─ js", "      │ let x = 1;", "      └─", "• c"],
      ["let", "\x1b[35mlet\x1b[39m"],
    ],
    [
      "`10. ` and `1.  ` markers, and a blank line between an item and its fence",
      "10. ten\n    ```\n    x\n    ```\n1.  one\n\n    ~~~py\n    y = 2\n    ~~~\n\n2. two",
      ["10. ten", "      ┌─", "      │ x", "      └─", "1. one", "", "      ┌─ py", "      │ y = 2", "      └─", "", "2. two"],
      ["2", "\x1b[33m2\x1b[39m"],
    ],
    [
      "a fence in a block quote: its lines without `> `, closed by a quoted fence",
      "> ```js\n> let a = 1;\n>   b\n> ```\n> said\nafter",
      ["▌ ┌─ js", "▌ │ let a = 1;", "▌ │   b", "▌ └─", "▌ said", "after"],
      ["let", "\x1b[35mlet\x1b[39m"],
    ],
    [
      "a quoted fence ends with the quote: a line without `>`",
      "> ```\n> x\nafter\n```\ncode",
      ["▌ ┌─", "▌ │ x", "▌ └─", "after", "  ┌─", "  │ code"],
      ["x", "x"],
    ],
    [
      "a top-level fence indented 2 spaces: its lines lose up to 2 spaces",
      "  ```py\n  x = 1\n    y\n z\n  ```\nafter",
      ["  ┌─ py", "  │ x = 1", "  │   y", "  │ z", "  └─", "after"],
      ["1", "\x1b[33m1\x1b[39m"],
    ],
    [
      "still text: a fence 4 spaces past an item's content, or after the list ended",
      "- a\n       ```\nb\n    ```\nc",
      ["• a", "       ```", "b", "    ```", "c"],
      ["b", "b"],
    ],
  ];

  it("whole (-p): every case shows its code, de-indented and highlighted, and its prose where they are", async () => {
    for (const [name, md, want, [code, styled]] of cases) {
      assert.deepEqual(await shown(renderMarkdown(md, false)), want, name);
      assert.ok(renderMarkdown(md, true).includes(styled), `${name}: ${JSON.stringify(renderMarkdown(md, true))}`);
      assert.ok(want.some((l) => l.includes(code)), name);
    }
  });

  it("interactive: the same screens, streamed cut at every line boundary (before and after each line break)", async () => {
    for (const [name, md, want] of cases) {
      const cuts = [...md.matchAll(/\n/g)].flatMap((m) => [m.index, m.index + 1]);
      for (const at of cuts) {
        const t = chatAnswer(60, 40);
        t.stream([md.slice(0, at), md.slice(at)]);
        t.complete(md);
        assert.deepEqual(await t.lines(), want, `${name} (cut at ${at})`);
        t.screen.stop();
      }
      // And a character at a time.
      const t = chatAnswer(60, 40);
      t.stream([...md]);
      t.complete(md);
      assert.deepEqual(await t.lines(), want, `${name} (deltas of 1)`);
      t.screen.stop();
    }
  });

  it("hostile: quoted fences opening and closing, and fences deep in lists, render in output bounded by the input", () => {
    const deep = Array.from({ length: 2_000 }, (_, i) => " ".repeat(2 * i) + "- x").join("\n");
    const inputs = {
      "200,000 quoted fence lines": "> ```\n".repeat(200_000),
      "200,000 quoted fences and code": "> ```js\n> let a;\n".repeat(100_000),
      "a fence 4,000 columns deep, 100,000 lines of code": deep + "\n" + " ".repeat(4_000) + "```\n" + "a\n".repeat(100_000),
      "200,000 indented fences in items": "- x\n  ```\n".repeat(100_000),
      "a 1 MB indentation before a fence, then quotes": " ".repeat(1 << 20) + "- x\n" + " ".repeat(1 << 20) + "```\n" + "> ```\n".repeat(1_000),
    };
    for (const [name, md] of Object.entries(inputs)) {
      const out = renderMarkdown(md, true);
      const lines = md.split("\n").length;
      assert.ok(out.length <= 3 * md.length + 40 * lines, `${name}: ${out.length} bytes out of ${md.length}`);
      assert.ok(out.length >= lines, name);
    }
    // A block's margin in a list is bounded: its code lines are not indented 4,000 columns.
    const md = Array.from({ length: 100 }, (_, i) => " ".repeat(2 * i) + "- x").join("\n") + "\n" + " ".repeat(200) + "```\ncode\n```";
    assert.ok(renderMarkdown(md, false).includes(`\n${" ".repeat(MAX_CODE_INDENT + 2)}│ code\n`));
  });
});
