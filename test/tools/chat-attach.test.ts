import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { CHAT_ATTACH_MAX_BYTES, chatOutboxDir, createChatAttachTool } from "../../src/runtime/tools/chat-attach.js";
import { attachedFile } from "../../src/client/scv/client.js";
import { call, makeCtx, tempDir } from "./helpers.js";

function setup(t: { after(fn: () => void): void }) {
  const root = tempDir(t);
  const ws = join(root, "ws");
  const home = join(root, "home");
  mkdirSync(ws);
  return { root, ws, home, tool: createChatAttachTool(home), ctx: makeCtx(ws) };
}

void test("chat_attach: copies into the outbox and answers the shape the bridges read", async (t) => {
  const { ws, home, tool, ctx } = setup(t);
  assert.equal(tool.risk, "read_only");
  mkdirSync(join(ws, "out"));
  writeFileSync(join(ws, "out", "report.pdf"), "PDF-DATA");
  const r = await call(tool, { path: "out/report.pdf", caption: "the report" }, ctx);
  assert.equal(r.isError, false, r.content);
  const v = JSON.parse(r.content) as { attached: { path: string; name: string; size: number; caption: string | null }; note: string };
  assert.deepEqual(Object.keys(v).sort(), ["attached", "note"]);
  assert.equal(v.attached.name, "report.pdf");
  assert.equal(v.attached.size, 8);
  assert.equal(v.attached.caption, "the report");
  assert.equal(dirname(v.attached.path), chatOutboxDir(home));
  assert.equal(readFileSync(v.attached.path, "utf8"), "PDF-DATA");
  assert.equal(statSync(v.attached.path).mode & 0o777, 0o600);
  assert.match(v.note, /report\.pdf/);
  assert.deepEqual(attachedFile(r.content), { path: v.attached.path, name: "report.pdf", size: 8, caption: "the report" });
  // Without a caption: null; a second attach of the same file gets its own private copy.
  const r2 = await call(tool, { path: join(ws, "out", "report.pdf") }, ctx);
  const v2 = JSON.parse(r2.content) as { attached: { path: string; caption: string | null } };
  assert.equal(v2.attached.caption, null);
  assert.notEqual(v2.attached.path, v.attached.path);
});

void test("chat_attach: size cap at and one past", async (t) => {
  const { ws, home, tool, ctx } = setup(t);
  writeFileSync(join(ws, "at.bin"), "");
  truncateSync(join(ws, "at.bin"), CHAT_ATTACH_MAX_BYTES);
  const at = await call(tool, { path: "at.bin" }, ctx);
  assert.equal(at.isError, false, at.content);
  assert.equal((JSON.parse(at.content) as { attached: { size: number } }).attached.size, CHAT_ATTACH_MAX_BYTES);
  writeFileSync(join(ws, "past.bin"), "");
  truncateSync(join(ws, "past.bin"), CHAT_ATTACH_MAX_BYTES + 1);
  const past = await call(tool, { path: "past.bin" }, ctx);
  assert.equal(past.isError, true);
  assert.equal(past.errorKind, "limit");
  assert.match(past.content, /past\.bin is 52428801 bytes; chats accept files of at most 52428800 bytes/);
  assert.equal(readdirSync(chatOutboxDir(home)).length, 1, "only the copy at the cap is in the outbox");
});

void test("chat_attach: refuses outside the workspace, symlinks out of it, directories and missing files", async (t) => {
  const { root, ws, home, tool, ctx } = setup(t);
  writeFileSync(join(root, "secret.txt"), "s");
  symlinkSync(join(root, "secret.txt"), join(ws, "link.txt"));
  for (const p of [join(root, "secret.txt"), "../secret.txt", "link.txt"]) {
    const r = await call(tool, { path: p }, ctx);
    assert.equal(r.isError, true, p);
    assert.equal(r.errorKind, "denied", p);
    assert.match(r.content, /outside the session's workspace/);
  }
  mkdirSync(join(ws, "dir"));
  const d = await call(tool, { path: "dir" }, ctx);
  assert.equal(d.isError, true);
  assert.match(d.content, /is a directory/);
  const m = await call(tool, { path: "nope.txt" }, ctx);
  assert.equal(m.isError, true);
  const bad = await call(tool, { path: "" }, ctx);
  assert.equal(bad.errorKind, "invalid_arguments");
  // Nothing refused reached the outbox.
  assert.equal(existsSync(chatOutboxDir(home)), false);
});
