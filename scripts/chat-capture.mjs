#!/usr/bin/env node
/**
 * Prints the screen capture in docs/chat.md: a real `berth chat` in a pseudo-terminal (util-linux `script`, 100×40,
 * TERM=xterm-256color, NO_COLOR=1) against the test suite's loopback fake provider. The model edits a file (approved
 * after its diff), wants to run a command (denied) and answers in markdown. The screen is read back through a
 * virtual terminal (xterm.js), so what is printed is what the terminal shows, footer included. The temporary
 * directory is shown as /home/me/demo.
 * Usage: npm run build && node scripts/chat-capture.mjs
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider } from "../dist/test/fakes/fake-provider.js";
import { chatEnv, FAKE, home, Proc } from "../dist/test/chat/helpers.js";
import { BERTH_BIN } from "../dist/test/helpers/paths.js";
import { VTerm } from "../dist/test/chat/vterm.js";

const q = (s) => `'${s.replace(/'/g, `'\\''`)}'`;
const fake = await startFakeProvider();
const dir = join(mkdtempSync(join(tmpdir(), "bc-")), "demo");
mkdirSync(dir);
writeFileSync(join(dir, "greet.py"), 'def greet(name):\n    print("Hello " + name)\n\ngreet("world")\n');
const answer = [
  "Done",
  "",
  "I changed one line in `greet.py`:",
  "",
  "```python",
  'print(f"Hello, {name}!")  # f-string',
  "```",
  "",
  "| file | change |",
  "|---|---|",
  "| greet.py | f-string greeting |",
  "",
  "- I did **not** run the commit: you denied it.",
  "",
].join("\n");
fake.script([
  { steps: [{ text: "I'll switch to an f-string.\n" }, { toolCall: { name: "edit", arguments: { path: "greet.py", old_string: 'print("Hello " + name)', new_string: 'print(f"Hello, {name}!")' } } }] },
  { steps: [{ toolCall: { name: "bash", arguments: { command: "python3 greet.py && git commit -am 'greet'" } } }] },
  { steps: [{ text: answer, chunks: 12 }] },
]);
const env = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
const p = new Proc("script", ["-q", "-e", "-c", `stty rows 40 cols 100; exec ${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env, dir);
const vt = new VTerm(100, 40);
try {
  await p.until(/› /);
  let mark = p.stdout.length;
  p.write("use an f-string in greet.py and commit\r");
  await p.until(/Allow\?/, mark);
  mark = p.stdout.length;
  p.write("y\r");
  await p.until(/Allow\?/, mark);
  mark = p.stdout.length;
  p.write("n\r");
  await p.until(/── completed[^\n]*\n[\s\S]*› /, mark);
  const screen = await vt.screen(p.stdout);
  process.stdout.write(screen.map((l) => l.split(dir).join("/home/me/demo").trimEnd()).join("\n").replace(/\n+$/, "") + "\n");
} finally {
  p.child.kill("SIGKILL");
  await fake.close();
}
