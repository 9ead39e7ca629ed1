/** The media outbox sweep: copies left over from replies that never went out are removed after a day, at and
 * one past the bound; fresh copies (a reply being delivered) stay. */
import assert from "node:assert/strict";
import { mkdir, readdir, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { it } from "node:test";
import { OUTBOX_KEEP_MS, pruneOutbox } from "../../src/channels/common/media.js";
import { tempHome } from "./helpers.js";

it("pruneOutbox removes copies older than a day and keeps the rest", async () => {
  const { home, cleanup } = await tempHome();
  try {
    const outbox = join(home, "state", "media", "outbox");
    await mkdir(join(outbox, "sub"), { recursive: true });
    const now = Math.floor(Date.now() / 1000) * 1000;
    const at = async (name: string, ageMs: number): Promise<void> => {
      await writeFile(join(outbox, name), name);
      const t = (now - ageMs) / 1000;
      await utimes(join(outbox, name), t, t);
    };
    await at("fresh.txt", 60_000);
    await at("at-bound.txt", OUTBOX_KEEP_MS);
    await at("past-bound.txt", OUTBOX_KEEP_MS + 1000);
    assert.equal(await pruneOutbox(outbox, now), 1);
    assert.deepEqual((await readdir(outbox)).sort(), ["at-bound.txt", "fresh.txt", "sub"]);
    assert.equal(await pruneOutbox(join(home, "missing"), now), 0);
  } finally {
    await cleanup();
  }
});
