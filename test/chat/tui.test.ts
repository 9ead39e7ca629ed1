/**
 * The terminal UI through a pseudo-terminal with a capable TERM: a streamed markdown answer rendered (heading,
 * emphasis, list, highlighted code block, aligned table), `\` continuation joining lines into one prompt, the
 * footer after a turn, and the markdown renderer's output as a snapshot.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { MAX_TABLE_CELLS, MAX_TABLE_COLUMNS, renderMarkdown } from "../../src/cli/chat/markdown.js";
import { chatEnv, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const ANSWER = "# Plan\n\nUse **bold** moves and `npm test`.\n\n- first\n- second\n\n```ts\nconst x = 1; // one\n```\n\n| file | lines |\n|---|---|\n| a.ts | 12 |\n| long-name.ts | 3 |\n";

describe("berth chat TUI", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("markdown renderer snapshot (color)", () => {
    assert.equal(
      renderMarkdown(ANSWER, true),
      [
        "\x1b[1;4mPlan\x1b[22;24m",
        "",
        "Use \x1b[1mbold\x1b[22m moves and \x1b[36mnpm test\x1b[39m.",
        "",
        "• first",
        "• second",
        "",
        "\x1b[2m  ┌─ ts\x1b[22m",
        "  \x1b[2m│\x1b[22m \x1b[35mconst\x1b[39m x = \x1b[33m1\x1b[39m; \x1b[2;3m// one\x1b[22;23m",
        "\x1b[2m  └─\x1b[22m",
        "",
        "\x1b[1mfile\x1b[22m         │ \x1b[1mlines\x1b[22m",
        "─────────────┼──────",
        "a.ts         │ 12   ",
        "long-name.ts │ 3    ",
        "",
      ].join("\n"),
    );
  });

  it("tables align up to their bounds and beyond them show as their rows; a model's 1 MiB table renders", () => {
    const aligned = (md: string): boolean => renderMarkdown(md, false).includes("─┼─");
    const table = (cols: number, rows: number): string => `|${"h|".repeat(cols)}\n|${"-|".repeat(cols)}\n` + `|${"c|".repeat(cols)}\n`.repeat(rows - 1);
    assert.equal(aligned(table(MAX_TABLE_COLUMNS, 2)), true);
    assert.equal(aligned(table(MAX_TABLE_COLUMNS + 1, 2)), false);
    assert.equal(aligned(table(2, MAX_TABLE_CELLS / 2)), true);
    assert.equal(aligned(table(2, MAX_TABLE_CELLS / 2 + 1)), false);
    const shownAsRows = renderMarkdown(table(MAX_TABLE_COLUMNS + 1, 2), false).split("\n");
    assert.equal(shownAsRows[0], `|${"h|".repeat(MAX_TABLE_COLUMNS + 1)}`);
    // 200,000 rows (their lines were spread into one call: a stack overflow), and one very wide row above many short
    // ones (padding every row to every column: rows × columns).
    assert.equal(renderMarkdown("|a|b|\n|-|-|\n" + "|x|y|\n".repeat(200_000), false).split("\n").length, 200_003);
    const wide = renderMarkdown("|" + "c|".repeat(170_000) + "\n" + "|x|\n".repeat(100_000), false);
    assert.equal(wide.split("\n").length, 100_002);
  });

  it("pty: -p with a terminal on stdin sends the prompt alone, without waiting for stdin, and renders the answer", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color", COLUMNS: "100" };
    const before = fake.requests.length;
    // stdin (the pseudo-terminal) stays open: a chat that read it would never send the prompt.
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat -p 'hello there'`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/echo: hello there/);
    assert.equal(await p.exited, 0);
    assert.equal(fake.requests.length, before + 1);
    const messages = (fake.requests.at(-1)!.json as { messages: Array<{ role: string; content: unknown }> }).messages;
    const content = messages.filter((m) => m.role === "user").at(-1)!.content;
    const text = typeof content === "string" ? content : (content as Array<{ text?: string }>).map((c) => c.text ?? "").join("");
    assert.equal(text, "hello there", "nothing appended to the prompt");
    assert.match(p.stdout, /session s[0-9a-z]/);
  });

  it("pty: a streamed answer is rendered as markdown; \\ continues a prompt; the footer names model, cwd and session", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color", COLUMNS: "100" };
    delete env["NO_COLOR"];
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/› /);
    fake.script([{ steps: [{ text: ANSWER, chunks: 9 }] }]);
    const before = fake.requests.length;
    let mark = p.stdout.length;
    p.write("first line \\\rsecond line\r");
    await p.until(/── completed[^\n]*fake-model[^\n]*\n/, mark);
    // One prompt holding both lines.
    assert.equal(fake.requests.length, before + 1);
    assert.match(fake.requests.at(-1)!.body, /first line \\nsecond line/);
    const screen = p.stdout.slice(mark);
    assert.match(screen, /\x1b\[1;4mPlan\x1b\[22;24m/);
    assert.match(screen, /\x1b\[1mbold\x1b\[22m/);
    assert.match(screen, /• first/);
    assert.match(screen, /\x1b\[35mconst\x1b\[39m/);
    assert.match(screen, /a\.ts {9}│ 12/);
    // What stays on screen (a line redrawn after `\r` keeps only its last drawing) has no markdown markers.
    const final = screen
      .replace(/\x1b\[[0-9;]*[A-Za-z]/g, "")
      .split("\r\n")
      .map((l) => l.split("\r").at(-1)!)
      .join("\n");
    assert.match(final, /^Use bold moves and npm test\.$/m);
    assert.match(final, /^file {9}│ lines$/m);
    assert.doesNotMatch(final, /\*\*bold\*\*|^# Plan|\|---\||^```/m);
    // Type-ahead while an answer streams never lands inside it: a whole line runs next (echoed then), a partial
    // line waits at the prompt.
    fake.script([{ steps: [{ text: "streaming slowly along to the end", chunks: 8 }], chunkDelayMs: 150 }]);
    mark = p.stdout.length;
    p.write("slow please\r");
    await p.until(/stream/, mark);
    p.write("queued next\rpartial");
    await p.until(/› queued next[\s\S]*echo: queued next[\s\S]*── completed[^\n]*\n[\s\S]*› [\s\S]*partial/, mark);
    const typed = p.stdout.slice(mark).replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");
    assert.match(typed, /streaming slowly along to the end/);
    // Clear the partial line (Ctrl-U) before going on.
    p.write("\x15");

    // A bracketed paste of several lines is one prompt, sent by the Enter after it.
    const n = fake.requests.length;
    mark = p.stdout.length;
    p.write("\x1b[200~pasted one\rpasted two\x1b[201~\r");
    await p.until(/── completed/, mark);
    assert.equal(fake.requests.length, n + 1);
    assert.match(fake.requests.at(-1)!.body, /pasted one\\npasted two/);

    mark = p.stdout.length;
    p.write("\x03");
    await p.until(/Ctrl-C again/, mark);
    p.write("\x03");
    assert.equal(await p.exited, 0);

    // The input history persists: a new chat recalls the last prompt with the Up arrow.
    const hist = readFileSync(join(env["MC_HOME"]!, "chat-history.jsonl"), "utf8");
    assert.deepEqual(hist.trim().split("\n"), ["pasted one\npasted two", "queued next", "slow please", "first line \nsecond line"].map((x) => JSON.stringify(x)));
    const again = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => again.child.kill("SIGKILL"));
    await again.until(/› /);
    mark = again.stdout.length;
    again.write("\x1b[A");
    await again.until(/pasted two/, mark);
    again.write("\x03\x03\x03");
    assert.equal(await again.exited, 0);
  });
});
