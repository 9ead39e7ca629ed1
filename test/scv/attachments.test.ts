/**
 * turn.start attachments over both transports: a valid PNG reaches the fake provider as image input (model with
 * `images: true`) and the prompt lists the file; a tool-free session sees no paths; refused with invalid_request:
 * a symlink, a relative path, 17 files (16 accepted), an unknown kind, a wrong size, a directory.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openTransport, startRig, TRANSPORTS, type Rig, type ScvClient, type Transport } from "./client.js";

/** A valid 1×1 PNG. */
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");

async function refused(c: ScvClient, sid: string, attachments: unknown, prompt = "look"): Promise<string> {
  const id = c.request({ type: "turn.start", session_id: sid, prompt, attachments });
  const r = await c.reply(id, ["turn.started", "queue.enqueued"]);
  assert.equal(r.type, "error", JSON.stringify(r));
  assert.equal(r.code, "invalid_request");
  return r.message as string;
}

for (const name of TRANSPORTS) {
  describe(`scv attachments over ${name}`, () => {
    let rig: Rig;
    let t: Transport;
    let dir: string;
    let png: string;
    before(async () => {
      rig = await startRig({ images: true });
      t = await openTransport(name, rig);
      dir = mkdtempSync(join(tmpdir(), "scv-media-"));
      png = join(dir, "photo.png");
      writeFileSync(png, PNG);
    });
    after(async () => {
      await t.close();
      await rig.fake.close();
    });

    it("sends a valid PNG to the provider as an image and lists the file in the prompt", async () => {
      const c = await t.open();
      const s = await c.open();
      const n = rig.fake.requests.length;
      const r = await c.turn(s.session_id as string, "what is this?", {
        attachments: [{ kind: "image", path: png, name: "photo.png", mime: "image/png", size: PNG.length }],
      });
      assert.equal(r.terminal.type, "turn.completed");
      const body = rig.fake.requests[n]!.body;
      assert.ok(body.includes(PNG.toString("base64")), "the image bytes reach the provider");
      assert.match(body, /image_url/);
      assert.match(body, /photo\.png/);
      assert.ok(body.includes(png), "a tool-enabled session sees the path");
      c.end();
      await c.closed;
    });

    it("re-reads an earlier image for the next request, and a deleted one becomes a note", async () => {
      const c = await t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      const own = join(dir, `kept-${name}.png`);
      writeFileSync(own, PNG);
      await c.turn(sid, "first", { attachments: [{ kind: "image", path: own, name: "kept.png", mime: "image/png", size: PNG.length }] });
      let n = rig.fake.requests.length;
      await c.turn(sid, "second");
      assert.ok(rig.fake.requests[n]!.body.includes(PNG.toString("base64")), "history keeps the path; the image is read again");
      unlinkSync(own);
      n = rig.fake.requests.length;
      await c.turn(sid, "third");
      const body = rig.fake.requests[n]!.body;
      assert.ok(!body.includes(PNG.toString("base64")));
      assert.match(body, /kept\.png is no longer available/);
      c.end();
      await c.closed;
    });

    it("hides paths from a tool-free session and accepts an empty prompt with attachments", async () => {
      const c = await t.open();
      const s = await c.open({ no_tools: true });
      const n = rig.fake.requests.length;
      const r = await c.turn(s.session_id as string, "", { attachments: [{ kind: "file", path: png, name: "photo.png", size: PNG.length }] });
      assert.equal(r.terminal.type, "turn.completed");
      const body = rig.fake.requests[n]!.body;
      assert.match(body, /photo\.png/);
      assert.ok(!body.includes(dir), "no path in a tool-free session's prompt");
      c.end();
      await c.closed;
    });

    it("refuses symlinks, relative paths, 17 files, unknown kinds, wrong sizes and directories", async () => {
      const c = await t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      const link = join(dir, "link.png");
      try {
        symlinkSync(png, link);
      } catch {
        // exists from the other transport's run
      }
      const sub = join(dir, "sub");
      mkdirSync(sub, { recursive: true });
      const ok = { kind: "image", path: png, size: PNG.length };
      assert.match(await refused(c, sid, [{ ...ok, path: link }]), /symlink/);
      assert.match(await refused(c, sid, [{ ...ok, path: "photo.png" }]), /absolute/);
      assert.equal(await refused(c, sid, Array.from({ length: 17 }, () => ok)), "at most 16 attachments per prompt; send the rest with another turn.start");
      assert.match(await refused(c, sid, [{ ...ok, kind: "hologram" }]), /kind/);
      assert.match(await refused(c, sid, [{ ...ok, size: PNG.length + 1 }]), /size/);
      assert.match(await refused(c, sid, [{ ...ok, path: sub, size: 0 }]), /regular file/);
      assert.match(await refused(c, sid, [{ ...ok, path: join(dir, "missing.png") }]), /not found/);
      // sixteen is the limit, not past it
      const r = await c.turn(sid, "sixteen", { attachments: Array.from({ length: 16 }, () => ({ ...ok, kind: "file" })) });
      assert.equal(r.terminal.type, "turn.completed");
      c.end();
      await c.closed;
    });
  });
}
