import { test } from "node:test";
import assert from "node:assert/strict";
import { boundText } from "../../src/runtime/tools/result.js";
import { validateJsonSchema } from "../../src/runtime/tools/json-schema.js";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createToolRegistry, openToolRegistry } from "../../src/runtime/tools/registry.js";
import { createWebFetchTool } from "../../src/runtime/tools/web-fetch.js";
import { createReadSkillTool } from "../../src/runtime/tools/read-skill.js";
import { createChatAttachTool } from "../../src/runtime/tools/chat-attach.js";
import { SkillCatalog } from "../../src/runtime/tools/skills.js";
import * as impl from "../../src/runtime/tools/index.js";

void test("registry: built-ins with zod-derived JSON schemas; no_tools is empty", async () => {
  const reg = await createToolRegistry({ cwd: process.cwd() });
  assert.deepEqual(
    reg.specs().map((s) => s.name),
    ["read", "write", "edit", "bash", "grep", "glob", "ls", "todo_write"],
  );
  const write = reg.specs().find((s) => s.name === "write");
  assert.deepEqual(write?.inputSchema, {
    type: "object",
    properties: {
      path: { type: "string", minLength: 1, description: "File to write; relative paths resolve against the working directory." },
      content: { type: "string", description: "The complete new file content." },
    },
    required: ["path", "content"],
    additionalProperties: false,
  });
  for (const s of reg.specs()) {
    assert.equal(s.inputSchema.type, "object");
    assert.equal(s.inputSchema.$schema, undefined);
    assert.ok(s.description.length > 0);
  }
  assert.equal(reg.get("bash")?.transport, "local");
  assert.equal(reg.get("nope"), undefined);
  await reg.close();
  const none = await createToolRegistry({ cwd: process.cwd(), noTools: true, mcpServers: { x: { command: "x", args: [], env: {} } } });
  assert.deepEqual(none.tools, []);
  assert.deepEqual(none.specs(), []);
  assert.deepEqual(none.mcpServers, []);
  await none.close();
});

void test("boundText keeps head and tail within the byte bound", () => {
  assert.equal(boundText("short", 100), "short");
  const s = "é".repeat(1000); // 2000 bytes
  const out = boundText(s, 500);
  assert.ok(Buffer.byteLength(out) <= 500);
  assert.ok(!out.includes("\uFFFD"));
  const m = /\[… (\d+) bytes omitted …\]/.exec(out);
  assert.ok(m !== null);
  const kept = Buffer.byteLength(out.replace(m[0], "").replace(/\n/g, ""));
  assert.equal(kept + Number(m[1]), 2000);
});

void test("JSON-Schema subset validator", () => {
  const schema = {
    type: "object",
    properties: {
      s: { type: "string" },
      n: { type: ["integer", "null"] },
      e: { enum: ["a", "b"] },
      arr: { type: "array", items: { type: "object", properties: { k: { const: 1 } }, required: ["k"] } },
      free: { $ref: "#/whatever" },
    },
    required: ["s"],
    additionalProperties: false,
  };
  assert.deepEqual(validateJsonSchema(schema, { s: "x", n: null, e: "a", arr: [{ k: 1 }], free: 3 }), []);
  assert.deepEqual(validateJsonSchema(schema, {}), ["s: required"]);
  assert.deepEqual(validateJsonSchema(schema, { s: 1 }), ["s: expected string, got number"]);
  assert.deepEqual(validateJsonSchema(schema, { s: "", n: 1.5 }), ["n: expected integer or null, got number"]);
  assert.deepEqual(validateJsonSchema(schema, { s: "", e: "c" }), ['e: must be one of ["a","b"]']);
  assert.deepEqual(validateJsonSchema(schema, { s: "", arr: [{}, { k: 2 }] }), ["arr[0].k: required", "arr[1].k: must equal 1"]);
  assert.deepEqual(validateJsonSchema(schema, { s: "", zz: 1 }), ["zz: unknown property"]);
  assert.deepEqual(validateJsonSchema(schema, "str"), ["(arguments): expected object, got string"]);
  let deep: unknown = 1;
  for (let i = 0; i < 100; i++) deep = { a: deep };
  assert.deepEqual(validateJsonSchema({ type: "object", additionalProperties: { type: ["object", "number"], additionalProperties: {} } }, deep).length, 0);
  const nested = { type: "object", additionalProperties: {} as Record<string, unknown> };
  nested.additionalProperties = nested;
  assert.match(validateJsonSchema(nested, deep)[0] ?? "", /too deeply nested/);
  assert.equal(validateJsonSchema(schema, Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`x${i}`, 1]))).length, 10);
});

void test("registry: each built-in's lazy stand-in offers what its implementation offers, and runs it on a call", async () => {
  const dir = mkdtempSync(join(tmpdir(), "lazy-tools-"));
  const skills = new SkillCatalog({ mcHome: dir, userHome: dir });
  const reg = openToolRegistry({ cwd: dir, bash: { maxTimeoutMs: 30_000 }, skills, webFetch: { autoApproveHosts: ["Example.com"] }, chatAttachHome: dir });
  const direct = [
    impl.readTool,
    impl.writeTool,
    impl.editTool,
    impl.createBashTool({ maxTimeoutMs: 30_000 }),
    impl.grepTool,
    impl.globTool,
    impl.lsTool,
    impl.todoWriteTool,
    createReadSkillTool(skills),
    createWebFetchTool({ autoApproveHosts: ["Example.com"] }),
    createChatAttachTool(dir),
  ];
  assert.deepEqual(
    reg.tools.map((t) => [t.spec, t.risk, t.transport]),
    direct.map((t) => [t.spec, t.risk, t.transport]),
  );
  for (const [i, t] of reg.tools.entries()) {
    for (const args of [{}, { path: "" }, { path: "a", content: 1 }, { pattern: "x", limit: 0 }, { command: "true", timeout: 31 }]) {
      assert.deepEqual(t.validate(args), direct[i]!.validate(args), `${t.spec.name} validates ${JSON.stringify(args)} like its implementation`);
    }
  }
  const fetch = reg.get("web_fetch")!;
  assert.equal(fetch.autoApprove?.({ url: "https://example.com/x" }), true);
  assert.equal(fetch.autoApprove?.({ url: "http://example.com/x" }), false);
  assert.equal(fetch.autoApprove?.({ url: "https://user:pw@example.com/x" }), false);
  writeFileSync(join(dir, "a.txt"), "one\ntwo\n");
  const ctx = { cwd: dir, signal: new AbortController().signal, onProgress: () => undefined };
  const read = await reg.get("read")!.run({ path: "a.txt" }, ctx);
  assert.equal(read.isError, false);
  assert.match(read.content, /^one\ntwo/);
  const ls = await reg.get("ls")!.run({}, ctx);
  assert.match(ls.content, /a\.txt/);
  await reg.close();
});

void test("registry: tool schemas are deeply frozen, shared by every registry, and unchanged by a write attempt", async () => {
  const { WRITE_DEF } = await import("../../src/runtime/tools/specs.js");
  const a = await createToolRegistry({ cwd: process.cwd() });
  const b = await createToolRegistry({ cwd: process.cwd() });
  const before = JSON.stringify(a.specs().map((s) => s.inputSchema));
  const walk = (v: unknown, path: string): void => {
    if (typeof v !== "object" || v === null) return;
    assert.ok(Object.isFrozen(v), `${path} is frozen`);
    for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`);
  };
  for (const s of a.specs()) {
    walk(s.inputSchema, s.name);
    // The same object in another registry (one frozen schema per argument schema, nothing per session).
    assert.equal(b.specs().find((x) => x.name === s.name)?.inputSchema, s.inputSchema, s.name);
    // Writes fail (ESM is strict) and leave the schema as the model sees it.
    const props = (s.inputSchema as { properties: Record<string, Record<string, unknown>> }).properties;
    const first = Object.keys(props)[0]!;
    assert.throws(() => (props[first]!["type"] = "number"), TypeError);
    assert.throws(() => (s.inputSchema["additionalProperties"] = true), TypeError);
  }
  assert.equal(JSON.stringify(a.specs().map((s) => s.inputSchema)), before);
  // The argument schema validates as its JSON says (what the model is told is what is checked).
  const write = a.specs().find((s) => s.name === "write")!;
  assert.deepEqual(write.inputSchema, JSON.parse(JSON.stringify(WRITE_DEF.schema.json)));
  assert.equal(a.tools.find((t) => t.spec.name === "write")?.validate({ path: "x" }).ok, false);
});
