/**
 * A protocol door run by hand in a terminal says what it is waiting for (one stderr line) instead of waiting in
 * silence; Ctrl-D ends it. With a pipe (how frontends, editors and clients run it) nothing extra is written.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, Proc } from "../chat/helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

const DOORS: Array<[string, RegExp]> = [
  ["service", /berth service: waiting for app-service v1 requests from a frontend app on stdin, one JSON message per line; for a terminal agent run `berth chat` \(Ctrl-D ends this\)/],
  ["stdio", /berth stdio: waiting for SCV v3 frames from a client app on stdin, one JSON message per line; for a terminal agent run `berth chat`/],
  ["acp", /berth acp: waiting for Agent Client Protocol messages from an editor on stdin, one JSON message per line; for a terminal agent run `berth chat`/],
];

function home(): string {
  const h = mkdtempSync(join(tmpdir(), "berth-tty-"));
  writeFileSync(join(h, "settings.json"), "{}");
  return h;
}

describe("protocol doors on a terminal", () => {
  for (const [door, note] of DOORS) {
    it(`berth ${door} in a terminal says what it waits for; Ctrl-D ends it`, { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
      const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} ${door}`, "/dev/null"], { ...chatEnv(home()), TERM: "dumb" });
      await p.until(note);
      p.write("\x04");
      assert.equal(await p.exited, 0);
    });

    it(`berth ${door} on a pipe writes no such line`, () => {
      const r = spawnSync(process.execPath, [BERTH_BIN, door], { env: chatEnv(home()), input: "", encoding: "utf8", timeout: 30_000 });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /waiting for/);
      assert.equal(r.stdout, "");
    });
  }
});
