/**
 * Tool cards and resizes through a pseudo-terminal: a bash call cancelled with Ctrl-C shows `cancelled` (not
 * `failed`); a terminal resize (SIGWINCH) while an answer streams leaves the whole rendered answer on screen.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, chatPid, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

describe("berth chat tool cards (pty)", { skip: hasScript ? false : "util-linux script is not installed" }, () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("a cancelled bash call shows cancelled; a resize mid-stream keeps the answer whole", async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat --yolo`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/› /);
    fake.script([{ steps: [{ toolCall: { name: "bash", arguments: { command: "sleep 30" } } }] }]);
    let mark = p.stdout.length;
    p.write("wait a while\r");
    await p.until(/● bash sleep 30/, mark);
    p.write("\x03");
    await p.until(/── [^\n]*cancelled/, mark);
    const out = p.stdout.slice(mark);
    assert.match(out, /· bash cancelled/);
    assert.doesNotMatch(out, /bash failed/);

    fake.script([{ steps: [{ text: "a line that streams in pieces and then ends\nsecond **line**\n", chunks: 10 }], chunkDelayMs: 100 }]);
    mark = p.stdout.length;
    p.write("stream it\r");
    await p.until(/a line/, mark);
    const pid = chatPid(p.child.pid!);
    assert.notEqual(pid, null);
    process.kill(pid!, "SIGWINCH");
    await p.until(/── completed/, mark);
    const final = p.stdout
      .slice(mark)
      .replace(/\x1b\[[0-9;]*[A-Za-z]/g, "")
      .split("\r\n")
      .map((l) => l.split("\r").at(-1)!);
    assert.ok(final.includes("a line that streams in pieces and then ends"), final.join("\n"));
    assert.ok(final.includes("second line"), final.join("\n"));
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });
});
