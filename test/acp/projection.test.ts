/**
 * The pure ACP projections, checked against the SDK's schema: tool kinds/titles/locations/diffs, prompt content
 * conversion, and history replay.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import type { RequestError, SessionUpdate } from "@agentclientprotocol/sdk";
import type { History, StoredRecord } from "../../src/store/sessions/index.js";
import { MAX_IMAGE_BYTES, MAX_PROMPT_IMAGES, MAX_PROMPT_TEXT_BYTES, toBerthPrompt } from "../../src/protocols/acp/prompt-content.js";
import { replayUpdates } from "../../src/protocols/acp/replay.js";
import { MAX_TITLE_CHARS, toolDiff, toolKind, toolLocations, toolTitle } from "../../src/protocols/acp/tool-view.js";
import { validateAgentFrame } from "./schema.js";

const notification = (u: SessionUpdate) => ({ jsonrpc: "2.0", method: "session/update", params: { sessionId: "s1", update: u } });

it("maps tools to kinds, one-line bounded titles, absolute locations and edit diffs", () => {
  assert.equal(toolKind("edit"), "edit");
  assert.equal(toolKind("write"), "edit");
  assert.equal(toolKind("bash"), "execute");
  assert.equal(toolKind("grep"), "search");
  assert.equal(toolKind("read"), "read");
  assert.equal(toolKind("mcp__x__y"), "other");
  assert.equal(toolTitle("bash", { command: "echo a\n  && echo b" }), "echo a && echo b");
  const long = toolTitle("bash", { command: "x".repeat(MAX_TITLE_CHARS + 1) });
  assert.equal(long.length, MAX_TITLE_CHARS);
  assert.equal(toolTitle("bash", { command: "y".repeat(MAX_TITLE_CHARS) }).length, MAX_TITLE_CHARS);
  assert.deepEqual(toolLocations("read", { path: "src/a.ts", offset: 7 }, "/w"), [{ path: "/w/src/a.ts", line: 7 }]);
  assert.deepEqual(toolLocations("edit", { path: "/abs/b.ts" }, "/w"), [{ path: "/abs/b.ts" }]);
  assert.deepEqual(toolLocations("bash", { command: "ls" }, "/w"), []);
  assert.deepEqual(toolDiff("edit", { path: "a.txt", old_string: "x", new_string: "y" }, "/w"), [{ type: "diff", path: "/w/a.txt", oldText: "x", newText: "y" }]);
  assert.deepEqual(toolDiff("write", { path: "n.txt", content: "new" }, "/w"), [{ type: "diff", path: "/w/n.txt", newText: "new" }]);
  assert.deepEqual(toolDiff("read", { path: "a.txt" }, "/w"), []);
});

it("turns prompt blocks into one text plus images, and refuses audio and empty prompts", () => {
  const p = toBerthPrompt([
    { type: "text", text: "look at" },
    { type: "resource_link", name: "a.ts", uri: "file:///w/a.ts" },
    { type: "resource", resource: { uri: "file:///w/b.ts", text: "const b = 1;" } },
    { type: "resource", resource: { uri: "file:///w/c.bin", blob: "AAAA", mimeType: "application/octet-stream" } },
    { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
  ]);
  assert.equal(
    p.text,
    "look at\n\n[linked resource: a.ts /w/a.ts]\n\nContents of /w/b.ts:\n```\nconst b = 1;\n```\n\n[attached binary resource /w/c.bin (application/octet-stream); its bytes are not shown]",
  );
  assert.deepEqual(p.images, [{ mediaType: "image/png", dataBase64: "iVBORw0KGgo=" }]);
  // An embedded Markdown file's own code block does not end the fence around it.
  const md = "# Use\n```sh\nnpm test\n```\nthen ````` five";
  assert.equal(toBerthPrompt([{ type: "resource", resource: { uri: "file:///w/README.md", text: md } }]).text, `Contents of /w/README.md:\n\`\`\`\`\`\`\n${md}\n\`\`\`\`\`\``);
  assert.throws(() => toBerthPrompt([{ type: "audio", mimeType: "audio/wav", data: "AA==" }]), (e: RequestError) => e.code === -32602);
  assert.throws(() => toBerthPrompt([{ type: "text", text: "  " }]), (e: RequestError) => e.code === -32602);
});

it("replays history in order: one chunk per message, tool calls with their results, interrupted calls failed, an unfinished turn's note", () => {
  let seq = 0;
  const rec = (r: Record<string, unknown>): StoredRecord => ({ ...r, seq: ++seq, at: "2026-01-01T00:00:00.000Z" }) as unknown as StoredRecord;
  const history: History = {
    checkpoint: null,
    complete: true,
    badLines: 0,
    torn: false,
    records: [
      rec({ kind: "user", turn_id: "t1", text: "fix it", attachments: [{ kind: "image", path: "/w/shot.png", mime: "image/png", size: 10 }] }),
      rec({ kind: "assistant", turn_id: "t1", message_id: "m1", text: "Look", partial: true }),
      rec({ kind: "assistant", turn_id: "t1", message_id: "m1", text: "Looking.", partial: false }),
      rec({ kind: "tool_call", turn_id: "t1", message_id: "m1", call_id: "c1", name: "edit", arguments: { path: "a.txt", old_string: "a", new_string: "b" } }),
      rec({ kind: "tool_result", turn_id: "t1", call_id: "c1", name: "edit", content: "edited a.txt", is_error: false }),
      rec({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "Looking." }),
      rec({ kind: "user", turn_id: "t2", text: "run it" }),
      rec({ kind: "tool_call", turn_id: "t2", message_id: "m2", call_id: "c2", name: "bash", arguments: { command: "sleep 100" } }),
      rec({ kind: "terminal", turn_id: "t2", status: "cancelled", assistant_text: "" }),
    ],
  };
  const ups = replayUpdates(history, "/w");
  assert.deepEqual(
    ups.map((u) => u.sessionUpdate),
    ["user_message_chunk", "user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update", "user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"],
  );
  assert.deepEqual((ups[1] as { content: unknown }).content, { type: "resource_link", name: "shot.png", uri: "file:///w/shot.png", mimeType: "image/png", size: 10 });
  assert.deepEqual((ups[2] as { content: unknown }).content, { type: "text", text: "Looking." });
  const done = ups[4] as Extract<SessionUpdate, { sessionUpdate: "tool_call_update" }>;
  assert.equal(done.status, "completed");
  assert.deepEqual(done.content?.[0], { type: "diff", path: "/w/a.txt", oldText: "a", newText: "b" });
  assert.equal((ups[7] as { status: string }).status, "failed");
  // The cancelled turn ends with the note its model context ends with (no blank line: no text of its own before it).
  assert.deepEqual((ups[8] as { content: unknown }).content, { type: "text", text: "[This reply was interrupted before it finished.]" });
  for (const u of ups) assert.equal(validateAgentFrame(notification(u), () => undefined), null, JSON.stringify(u));
});

it("approval modes: ask-all asks for everything, ask for everything but reads, auto-edit also runs file edits, full asks nothing", async () => {
  const { needsApproval } = await import("../../src/runtime/session/index.js");
  const { approvalOf } = await import("../../src/protocols/acp/config-options.js");
  const risks = ["read_only", "filesystem", "process", "delegate", "network"] as const;
  const asks = (mode: "ask-all" | "ask" | "auto-edit" | "full") => risks.filter((r) => needsApproval(approvalOf(mode), r));
  assert.deepEqual(asks("ask-all"), [...risks]);
  assert.deepEqual(asks("ask"), ["filesystem", "process", "delegate", "network"]);
  assert.deepEqual(asks("auto-edit"), ["process", "delegate", "network"]);
  assert.deepEqual(asks("full"), []);
});

it("prompt bounds hold exactly: text bytes, image count, image size, image types", () => {
  const bad = (e: RequestError) => e.code === -32602;
  assert.equal(toBerthPrompt([{ type: "text", text: "é".repeat(MAX_PROMPT_TEXT_BYTES / 2) }]).text.length, MAX_PROMPT_TEXT_BYTES / 2);
  assert.throws(() => toBerthPrompt([{ type: "text", text: "x" + "é".repeat(MAX_PROMPT_TEXT_BYTES / 2) }]), bad);
  // Across parts (the blank lines between them count): a text and an embedded resource rendered to exactly the bound.
  const frame = "ab\n\nContents of /x:\n```\n\n```".length;
  const parts = (first: string) => [{ type: "text" as const, text: first }, { type: "resource" as const, resource: { uri: "file:///x", text: "é".repeat((MAX_PROMPT_TEXT_BYTES - frame) / 2) } }];
  assert.equal(toBerthPrompt(parts("ab")).text.length, frame + (MAX_PROMPT_TEXT_BYTES - frame) / 2);
  assert.throws(() => toBerthPrompt(parts("abc")), bad);
  const png = { type: "image" as const, mimeType: "image/png", data: "iVBORw0KGgo=" };
  assert.equal(toBerthPrompt(Array.from({ length: MAX_PROMPT_IMAGES }, () => png)).images.length, MAX_PROMPT_IMAGES);
  assert.throws(() => toBerthPrompt(Array.from({ length: MAX_PROMPT_IMAGES + 1 }, () => png)), bad);
  const pngOf = (n: number): string => {
    const b = Buffer.alloc(n, 1);
    Buffer.from("iVBORw0KGgo=", "base64").copy(b);
    return b.toString("base64");
  };
  // Decoded bytes, padding excluded: 8 MiB - 1 ends in "==", 8 MiB in "=", 8 MiB + 1 in none, 8 MiB + 2 in "==".
  const padding = (n: number): number => /=*$/.exec(pngOf(n))![0].length;
  assert.deepEqual([-1, 0, 1, 2].map((d) => padding(MAX_IMAGE_BYTES + d)), [2, 1, 0, 2]);
  for (const n of [MAX_IMAGE_BYTES - 1, MAX_IMAGE_BYTES]) assert.equal(toBerthPrompt([{ ...png, data: pngOf(n) }]).images.length, 1, `${n} bytes`);
  for (const n of [MAX_IMAGE_BYTES + 1, MAX_IMAGE_BYTES + 2])
    assert.throws(() => toBerthPrompt([{ ...png, data: pngOf(n) }]), (e: RequestError) => bad(e) && /an image is larger than 8388608 bytes/.test(e.message), `${n} bytes`);
  // Line-wrapped base64 (76 characters and CRLF a line, as MIME writes it): whitespace is not counted, and is dropped.
  const wrapped = (n: number): string => pngOf(n).replace(/.{76}/g, "$&\r\n");
  assert.equal(toBerthPrompt([{ ...png, data: wrapped(MAX_IMAGE_BYTES) }]).images[0]!.dataBase64, pngOf(MAX_IMAGE_BYTES));
  assert.throws(() => toBerthPrompt([{ ...png, data: wrapped(MAX_IMAGE_BYTES + 1) }]), bad);
  // Several images together: at most 32 MiB decoded (four of 8 MiB), and one byte more is refused.
  assert.equal(toBerthPrompt(Array.from({ length: 4 }, () => ({ ...png, data: pngOf(MAX_IMAGE_BYTES) }))).images.length, 4);
  assert.throws(
    () => toBerthPrompt([...Array.from({ length: 4 }, () => ({ ...png, data: pngOf(MAX_IMAGE_BYTES) })), { ...png, data: pngOf(8) }]),
    (e: RequestError) => bad(e) && /images together are larger/.test(e.message),
  );
  assert.throws(() => toBerthPrompt([{ ...png, mimeType: "image/tiff" }]), bad);
});

it("an unexpected failure in a handler answers the fixed internal error and logs only the error's name", async () => {
  const acp = await import("@agentclientprotocol/sdk");
  const { handle } = await import("../../src/protocols/acp/handle.js");
  const logged: string[] = [];
  const app = acp.agent({ name: "t" });
  handle(app, (l) => logged.push(l), "initialize", () => {
    throw new TypeError("boom at /home/someone/.berth/auth.json token=sk-live-123");
  });
  await acp.client({ name: "c" }).connectWith(app, async (agent) => {
    await assert.rejects(agent.request("initialize", { protocolVersion: 1 }), (e: RequestError) => {
      assert.equal(e.code, -32603);
      assert.doesNotMatch(JSON.stringify({ m: e.message, d: e.data }), /boom|sk-live|someone/);
      return true;
    });
  });
  assert.deepEqual(logged, ["berth acp: initialize failed (TypeError)"]);
});
