/**
 * The crypto-free primitives of a fresh process's first session and turn (issue 19): random bytes, UUIDs and IDs
 * from the kernel's CSPRNG pool (store/random.ts), and the plain-JavaScript SHA-256 (core/sha256.ts) that names the
 * catalog cache's files and fingerprints providers. Digests must equal node:crypto's (on-disk names depend on them).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { randomBytes, randomId, randomUUID } from "../../src/store/random.js";
import { sha256Hex } from "../../src/core/sha256.js";

it("sha256Hex equals node:crypto's SHA-256 at every padding boundary and for non-ASCII text", () => {
  const inputs = ["", "abc", "berth-activity-v1\u0000tool\u0000call_1", "é😀\u2028" + "x".repeat(300), "\ud800 lone surrogate"];
  for (let n = 50; n <= 130; n++) inputs.push("a".repeat(n));
  for (const s of inputs) assert.equal(sha256Hex(s), createHash("sha256").update(s).digest("hex"), `length ${s.length}`);
  assert.equal(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
});

it("randomBytes gives the requested length, never the same bytes twice, across pool refills and beyond a pool", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const b = randomBytes(10);
    assert.equal(b.length, 10);
    const hex = b.toString("hex");
    assert.ok(!seen.has(hex), "a repeated 80-bit value");
    seen.add(hex);
  }
  const big = randomBytes(10_000);
  assert.equal(big.length, 10_000);
  assert.ok(new Set(big).size > 200, "a large read is filled");
  assert.equal(randomBytes(0).length, 0);
});

it("randomBytes hands out a copy: changing it leaves later values alone", () => {
  const a = randomBytes(16);
  a.fill(0);
  assert.notDeepEqual(randomBytes(16), Buffer.alloc(16));
});

it("randomUUID is an RFC 9562 version 4 UUID; randomId is the prefix and 128 bits in base64url", () => {
  const ids = new Set<string>();
  for (let i = 0; i < 500; i++) {
    const u = randomUUID();
    assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    ids.add(u);
  }
  assert.equal(ids.size, 500);
  const id = randomId("turn-");
  assert.match(id, /^turn-[A-Za-z0-9_-]{22}$/);
  assert.equal(Buffer.from(id.slice(5), "base64url").length, 16);
});
