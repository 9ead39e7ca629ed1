/**
 * A voice attachment's `transcript` (SCV turn.start) reaches the model: the provider request carries it with the
 * prompt, a tool-free session gets it too (without the path), and later turns still carry it (history keeps it on
 * the user record, which the session file shows).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openTransport, startRig, type Rig, type Transport } from "./client.js";

describe("scv attachment transcripts over stdio", () => {
  let rig: Rig;
  let t: Transport;
  let voice: string;
  const AUDIO = Buffer.from("OggS-not-really-audio");
  before(async () => {
    rig = await startRig();
    t = await openTransport("stdio", rig);
    const dir = mkdtempSync(join(tmpdir(), "scv-voice-"));
    voice = join(dir, "voice.ogg");
    writeFileSync(voice, AUDIO);
  });
  after(async () => {
    await t.close();
    await rig.fake.close();
  });

  it("sends the transcript to the provider and keeps it for later turns", async () => {
    const c = await t.open();
    const s = await c.open();
    const sid = s.session_id as string;
    const attachments = [{ kind: "audio", path: voice, name: "voice.ogg", mime: "audio/ogg", size: AUDIO.length, transcript: "please rename foo to bar\nin every file" }];
    let n = rig.fake.requests.length;
    const r = await c.turn(sid, "", { attachments });
    assert.equal(r.terminal.type, "turn.completed", JSON.stringify(r.terminal));
    let body = rig.fake.requests[n]!.body;
    assert.match(body, /transcript: please rename foo to bar\\n  in every file/);
    assert.ok(body.includes(voice), "a tool-enabled session sees the path");
    n = rig.fake.requests.length;
    await c.turn(sid, "and now?");
    body = rig.fake.requests[n]!.body;
    assert.match(body, /transcript: please rename foo to bar/, "the next request still carries the transcript (history)");
    const file = readdirSync(join(rig.home, "sessions")).find((f) => f.startsWith(sid));
    assert.ok(file !== undefined, "the session file exists");
    const user = readFileSync(join(rig.home, "sessions", file), "utf8")
      .split("\n")
      .filter((l) => l.includes('"kind":"user"'))[0]!;
    assert.equal((JSON.parse(user) as { attachments: Array<{ transcript?: string }> }).attachments[0]!.transcript, "please rename foo to bar\nin every file");
    c.end();
    await c.closed;
  });

  it("gives a tool-free session the transcript without the path", async () => {
    const c = await t.open();
    const s = await c.open({ no_tools: true });
    const n = rig.fake.requests.length;
    const r = await c.turn(s.session_id as string, "listen", {
      attachments: [{ kind: "audio", path: voice, name: "voice.ogg", size: AUDIO.length, transcript: "what time is it" }],
    });
    assert.equal(r.terminal.type, "turn.completed");
    const body = rig.fake.requests[n]!.body;
    assert.match(body, /transcript: what time is it/);
    assert.ok(!body.includes(voice), "no path in a tool-free session's prompt");
    c.end();
    await c.closed;
  });
});
