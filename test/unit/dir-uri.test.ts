/**
 * `directoryUri` (src/core/dir-uri.ts): the New session dialog's path → file:// URI. The daemon reads it back with
 * `fileURLToPath`, so the round trip must give the typed directory, whatever characters its name holds.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { directoryUri } from "../../src/core/dir-uri.js";

it("an absolute path round-trips through fileURLToPath, with #, ?, %, spaces and non-ASCII in its names", () => {
  for (const p of ["/", "/tmp/a#b", "/tmp/what?now", "/tmp/100%25 done/x", "/home/u/My Project/ünï 中文", "/a;b/c=d&e/f+g", "/x/[y]/@z"]) {
    const r = directoryUri(`  ${p} `);
    assert.ok(r.ok, p);
    assert.equal(fileURLToPath(r.uri), p);
    assert.doesNotMatch(r.uri.slice("file://".length), /[#?]/, r.uri);
  }
  assert.deepEqual(directoryUri("/tmp//a"), { ok: true, uri: "file:///tmp/a" });
});

it("a Windows path keeps its drive and turns backslashes into separators; a typed file: URI is kept", () => {
  assert.deepEqual(directoryUri("C:\\Users\\me\\a#b"), { ok: true, uri: "file:///C:/Users/me/a%23b" });
  assert.deepEqual(directoryUri("d:/work"), { ok: true, uri: "file:///d:/work" });
  assert.deepEqual(directoryUri("file:///srv/x"), { ok: true, uri: "file:///srv/x" });
});

it("~ and relative paths are refused with what to type instead", () => {
  const home = directoryUri("~/project");
  assert.ok(!home.ok && /~ is not expanded/.test(home.error) && /full path/.test(home.error));
  const rel = directoryUri("project/sub");
  assert.ok(!rel.ok && /full path \(starting with \/\)/.test(rel.error));
});
