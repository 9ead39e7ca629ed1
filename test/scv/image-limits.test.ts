/**
 * The spec's image-input bounds for turn.start attachments, at the limit and one past it, through `berth stdio` and
 * the daemon socket against the loopback fake provider (model with `images: true`): an image of exactly 8 MiB is
 * sent as image input and one of 8 MiB + 1 byte is only listed in the prompt; of nine images in one prompt the
 * newest eight are sent, and the next request reads the newest eight of the history again. None of this refuses the
 * turn: the prompt's file list names every file.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_IMAGE_BYTES, MAX_IMAGES } from "../../src/runtime/session/attachments.js";
import { openTransport, startRig, TRANSPORTS, type Rig, type Transport } from "./client.js";

/** A valid 1×1 PNG. */
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");

/** A PNG file of exactly `bytes` bytes whose last byte is `tag` (so each file's base64 is its own). */
function pngOf(bytes: number, tag: number): Buffer {
  const b = Buffer.alloc(bytes);
  PNG.copy(b);
  b[bytes - 1] = tag;
  return b;
}

const imageParts = (body: string): number => body.split("data:image/").length - 1;

for (const name of TRANSPORTS) {
  describe(`scv image input bounds over ${name}`, () => {
    let rig: Rig;
    let t: Transport;
    let dir: string;
    before(async () => {
      rig = await startRig({ images: true });
      t = await openTransport(name, rig);
      dir = mkdtempSync(join(tmpdir(), "scv-img-"));
    });
    after(async () => {
      await t.close();
      await rig.fake.close();
    });

    it(`sends an image of ${MAX_IMAGE_BYTES} bytes and only lists one a byte larger`, async () => {
      const at = pngOf(MAX_IMAGE_BYTES, 1);
      const past = pngOf(MAX_IMAGE_BYTES + 1, 2);
      writeFileSync(join(dir, "at.png"), at);
      writeFileSync(join(dir, "past.png"), past);
      const c = await t.open();
      const s = await c.open();
      const n = rig.fake.requests.length;
      const r = await c.turn(s.session_id as string, "two pictures", {
        attachments: [
          { kind: "image", path: join(dir, "at.png"), name: "at.png", size: at.length },
          { kind: "image", path: join(dir, "past.png"), name: "past.png", size: past.length },
        ],
      });
      assert.equal(r.terminal.type, "turn.completed");
      const body = rig.fake.requests[n]!.body;
      assert.equal(imageParts(body), 1, "one image part");
      assert.ok(body.includes(at.toString("base64")), "the 8 MiB image is sent");
      assert.ok(body.includes(`past.png, ${MAX_IMAGE_BYTES + 1} bytes`), "the larger one is still listed");
      // the connection goes on
      assert.equal((await c.turn(s.session_id as string, "and now?")).terminal.type, "turn.completed");
      c.end();
      await c.closed;
    });

    it(`sends the newest ${MAX_IMAGES} of ${MAX_IMAGES + 1} images, and reads the newest ${MAX_IMAGES} again next request`, async () => {
      const files = Array.from({ length: MAX_IMAGES + 1 }, (_, i) => {
        const path = join(dir, `${name}-${i}.png`);
        const bytes = pngOf(PNG.length + 1, 10 + i);
        writeFileSync(path, bytes);
        return { path, b64: bytes.toString("base64"), size: bytes.length };
      });
      const c = await t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      let n = rig.fake.requests.length;
      const r = await c.turn(sid, "nine pictures", { attachments: files.map((f) => ({ kind: "image", path: f.path, size: f.size })) });
      assert.equal(r.terminal.type, "turn.completed");
      const sent = (body: string): boolean[] => files.map((f) => body.includes(f.b64));
      assert.equal(imageParts(rig.fake.requests[n]!.body), MAX_IMAGES);
      assert.deepEqual(sent(rig.fake.requests[n]!.body), [false, ...Array<boolean>(MAX_IMAGES).fill(true)]);
      n = rig.fake.requests.length;
      assert.equal((await c.turn(sid, "again")).terminal.type, "turn.completed");
      assert.equal(imageParts(rig.fake.requests[n]!.body), MAX_IMAGES);
      assert.deepEqual(sent(rig.fake.requests[n]!.body), [false, ...Array<boolean>(MAX_IMAGES).fill(true)]);
      c.end();
      await c.closed;
    });
  });
}
