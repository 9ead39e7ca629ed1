/**
 * Interactive `berth chat` driven through a pseudo-terminal (util-linux `script`): type a prompt and see streamed
 * text, cancel a running turn with Ctrl-C, resume a session (history replayed, then continued), exit with Ctrl-C.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

describe("berth chat interactive (pty)", { skip: hasScript ? false : "util-linux script is not installed" }, () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("streams, cancels with Ctrl-C, resumes a session, exits on a double Ctrl-C", async () => {
    const env = { ...chatEnv(home(fake.port), FAKE), TERM: "dumb" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    await p.until(/› /);

    let mark = p.stdout.length;
    p.write("hello pty\r");
    await p.until(/echo: hello pty[\s\S]*── completed/, mark);

    // Ctrl-C cancels the running turn; its partial text stays on screen.
    fake.script([{ steps: [{ text: "partial answer" }, { waitForAbort: true }] }]);
    mark = p.stdout.length;
    p.write("slow one\r");
    await p.until(/partial answer/, mark);
    p.write("\x03");
    await p.until(/── cancelled/, mark);

    mark = p.stdout.length;
    p.write("/sessions\r");
    const id = (await p.until(/\* +\d+\. (\S+)/, mark))[1]!;

    mark = p.stdout.length;
    p.write("/new\r");
    await p.until(/new conversation/, mark);

    mark = p.stdout.length;
    p.write(`/resume ${id}\r`);
    await p.until(/resumed /, mark);
    const history = p.stdout.slice(mark);
    for (const want of [/you:\s+hello pty/, /assistant:\s+echo: hello pty/, /you:\s+slow one/, /assistant:\s+partial answer/, /turn cancelled/])
      assert.match(history, want);

    mark = p.stdout.length;
    const before = fake.requests.length;
    p.write("continue please\r");
    await p.until(/echo: continue please[\s\S]*── completed/, mark);
    // The continued turn carried the resumed history to the provider.
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /hello pty/);

    // /login shows the authorization URL; Ctrl-C cancels the sign-in (the login terminal is reported).
    mark = p.stdout.length;
    p.write("/login\r");
    await p.until(/Open this URL in your browser to sign in:\s+https?:\/\/\S+/, mark);
    p.write("\x03");
    await p.until(/Sign-in ended: cancelled/, mark);

    mark = p.stdout.length;
    p.write("\x03");
    await p.until(/Ctrl-C again/, mark);
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });
});
