/**
 * A prompt with nothing but whitespace is an empty prompt (spec: "A prompt may be empty only when it has
 * attachments"; the reference server refuses `prompt.trim().is_empty()`), over both transports: refused on
 * `turn.start` and `queue.update` without attachments, with no turn started; accepted with attachments. Whitespace is
 * Unicode's White_Space, as Rust's `str::trim` counts it: NEL (U+0085) is whitespace although JavaScript's `trim`
 * keeps it, and a BOM (U+FEFF) or a zero-width space is not although `trim` drops the BOM.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MESSAGES } from "../../src/protocols/scv/wire.js";
import { TRANSPORTS, type Msg } from "./client.js";
import { useRig } from "./rig.js";

const BLANK = [" ", "\t\r\n\v\f", "\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000", "\u0085"];
const NOT_BLANK = ["\ufeff", "\u200b", " . "];

for (const name of TRANSPORTS) {
  describe(`scv blank prompts over ${name}`, () => {
    const suite = useRig(name);

    it("turn.start refuses a whitespace-only prompt without attachments, starts one with attachments", async () => {
      const c = await suite.t.open();
      const sid = (await c.open()).session_id as string;
      const asked = suite.rig.fake.requests.length;
      for (const prompt of BLANK) {
        const r = await c.turn(sid, prompt);
        assert.deepEqual([r.terminal.type, r.terminal.code, r.terminal.message], ["error", "invalid_request", MESSAGES.blankPrompt], JSON.stringify(prompt));
        assert.deepEqual(r.frames.map((m) => m.type), ["error"], "no turn started");
      }
      assert.equal(suite.rig.fake.requests.length, asked, "nothing reached the model");
      // The bound: a character that is not White_Space makes a prompt (the reference's trim keeps it too).
      for (const prompt of NOT_BLANK) assert.equal((await c.turn(sid, prompt)).terminal.type, "turn.completed", JSON.stringify(prompt));
      const dir = mkdtempSync(join(tmpdir(), "scv-blank-"));
      writeFileSync(join(dir, "f.txt"), "hello");
      const withFile = await c.turn(sid, " \n", { attachments: [{ kind: "file", path: join(dir, "f.txt"), size: 5 }] });
      assert.equal(withFile.terminal.type, "turn.completed");
      c.end();
      await c.closed;
    });

    it("queue.update refuses a whitespace-only prompt on an entry without attachments", async () => {
      const c = await suite.t.open();
      const sid = (await c.open()).session_id as string;
      await c.reply(c.request({ type: "session.pause", session_id: sid, paused: true }), ["session.paused"]);
      const queued = await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: "x" }), ["queue.enqueued"]);
      const entry = queued.entry as Msg;
      const update = (prompt: string): Promise<Msg> =>
        c.reply(c.request({ type: "queue.update", session_id: sid, queue_id: entry.queue_id, revision: entry.revision, prompt }), ["queue.updated"]);
      for (const prompt of BLANK) {
        const r = await update(prompt);
        assert.deepEqual([r.type, r.code, r.message], ["error", "invalid_request", MESSAGES.blankPrompt], JSON.stringify(prompt));
      }
      const kept = await update("\ufeff");
      assert.deepEqual([kept.type, kept.entry.prompt, kept.entry.revision], ["queue.updated", "\ufeff", 2]);
      c.end();
      await c.closed;
    });
  });
}
