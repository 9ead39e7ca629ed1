/**
 * The MCP tool-list cache: owner-only files keyed by a hash of the definition and cwd (no env value in them),
 * bounded, and tolerant: a malformed or oversized file reads as no cache, a list past the bounds is not written.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_CACHE_FILE_BYTES, MAX_CACHED_TOOLS, mcpToolCache } from "../../src/runtime/tools/mcp-cache.js";

const def = { command: "node", args: ["srv.js"], env: { API_TOKEN: "tok-SECRET-123" } };
const tool = (name: string, description = "d") => ({ name, description, inputSchema: { type: "object", properties: {} } });

void test("mcp cache: round trip, owner-only, keyed by definition and cwd, no env values written", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "mcp-cache-")), "mcp-tools");
  const c = mcpToolCache(dir);
  assert.equal(c.read(def, "/a"), null);
  c.write(def, "/a", [tool("echo")]);
  assert.deepEqual(c.read(def, "/a"), [tool("echo")]);
  assert.equal(c.read(def, "/b"), null, "another cwd is another entry");
  assert.equal(c.read({ ...def, args: ["other.js"] }, "/a"), null, "another definition is another entry");
  const [file] = readdirSync(dir);
  assert.match(file!, /^[0-9a-f]{64}\.json$/);
  assert.equal(statSync(join(dir, file!)).mode & 0o777, 0o600);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  assert.ok(!readFileSync(join(dir, file!), "utf8").includes("SECRET"));
});

void test("mcp cache: bounds, and malformed files read as no cache", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "mcp-cache-")), "mcp-tools");
  const c = mcpToolCache(dir);
  c.write(def, "/n", Array.from({ length: MAX_CACHED_TOOLS }, (_, i) => tool(`t${i}`)));
  assert.equal(c.read(def, "/n")?.length, MAX_CACHED_TOOLS, "at the tool bound: cached");
  c.write(def, "/m", Array.from({ length: MAX_CACHED_TOOLS + 1 }, (_, i) => tool(`t${i}`)));
  assert.equal(c.read(def, "/m"), null, "one past the tool bound: not cached");
  c.write(def, "/big", [tool("x", "y".repeat(MAX_CACHE_FILE_BYTES))]);
  assert.equal(c.read(def, "/big"), null, "a file past the byte bound is not written");
  c.write(def, "/bad", [tool("ok")]);
  const file = readdirSync(dir).find((f) => readFileSync(join(dir, f), "utf8").includes('"ok"'))!;
  for (const body of ["not json", "[]", '{"tools":[{"name":1,"inputSchema":{}}]}', '{"tools":[{"name":"a","inputSchema":[]}]}']) {
    writeFileSync(join(dir, file), body);
    assert.equal(c.read(def, "/bad"), null, body);
  }
});
