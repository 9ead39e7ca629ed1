/**
 * The compaction summary request carries earlier images as a short text placeholder (`[image: image/png, 1.1 MB]`),
 * never their bytes: a request refused as too large because of the history's images (HTTP 413 past a body limit) is
 * then cured by compacting, instead of the summary request being refused the same way.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import { runLoop } from "../../src/runtime/turn-loop.js";
import type { Message } from "../../src/runtime/types.js";
import { lastUserText, startFakeProvider, type FakeTurn } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";

/** A request body limit in front of the provider (a proxy's, or Anthropic's 32 MB scaled down). */
const BODY_LIMIT = 512 * 1024;
/** 1,050,000 bytes of image once decoded: alone over the limit. */
const IMAGE = "A".repeat(1_400_000);

/** Anthropic's answer past its body limit. */
const TOO_LARGE: FakeTurn = { status: 413, body: JSON.stringify({ type: "error", error: { type: "request_too_large", message: "Request exceeds the maximum allowed number of bytes." } }) };

/** A provider behind a body limit: a request over it is refused (413); else the summary, or the answer. */
function server(_api: unknown, json: unknown): FakeTurn {
  if (JSON.stringify(json).length > BODY_LIMIT) return TOO_LARGE;
  if (lastUserText(json).includes("Summarize the conversation")) return { steps: [{ text: "SUMMARY-OF-EARLIER" }] };
  return { steps: [{ text: "the answer" }] };
}

const history = (): Message[] => [
  { role: "user", content: [{ type: "text", text: "EARLIER-QUESTION about" }, { type: "image", mediaType: "image/png", dataBase64: IMAGE }, { type: "text", text: "this screenshot" }] },
  { role: "assistant", content: [{ type: "text", text: "EARLIER-ANSWER" }] },
  { role: "user", content: [{ type: "text", text: "NEW-PROMPT" }] },
];

it("a turn whose history holds a big image and is refused with 413 compacts, the summary request without the image, and completes", async () => {
  const fake = await startFakeProvider({ defaultTurn: server });
  try {
    const provider = createProvider("fake", { api: "anthropic", baseUrl: fake.baseUrl }, () => Promise.resolve(null));
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loopOptions(fake, events, { provider, subagents: false, compactAtRatio: 0.8, messages: history() }));
    assert.equal(out.status, "completed", `${out.reason ?? ""} ${out.message ?? ""}`);
    assert.equal(out.assistantText, "the answer");
    assert.deepEqual(events.flatMap((e) => (e.type === "compaction" ? [e.status] : [])), ["triggered", "running", "completed"]);
    const [refused, summary, retry] = fake.requests.map((r) => r.body);
    assert.equal(fake.requests.length, 3);
    assert.ok(refused!.includes(IMAGE), "the refused request carried the image");
    assert.ok(!summary!.includes(IMAGE.slice(0, 64)) && !summary!.includes('"type":"image"'), "the summary request carries no image data");
    const at = ["EARLIER-QUESTION about", "[image: image/png, 1.1 MB]", "this screenshot"].map((t) => summary!.indexOf(t));
    assert.ok(at[0]! >= 0 && at[0]! < at[1]! && at[1]! < at[2]!, "a placeholder stands where the image was");
    assert.ok(summary!.includes("EARLIER-ANSWER"));
    assert.ok(retry!.includes("SUMMARY-OF-EARLIER") && retry!.includes("NEW-PROMPT") && !retry!.includes(IMAGE.slice(0, 64)));
  } finally {
    await fake.close();
  }
});

it("this turn's own images stay in the request sent after compaction (mid-turn: only the summary request has placeholders)", async () => {
  const small = "iVBORw0KGgo=";
  const fake = await startFakeProvider();
  try {
    fake.script([
      { steps: [{ toolCall: { id: "a", name: "nope", arguments: {} } }] },
      { status: 400, body: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } }) },
      { steps: [{ text: "SUMMARY-OF-WORK" }] },
      { steps: [{ text: "done" }] },
    ]);
    const provider = createProvider("fake", { api: "anthropic", baseUrl: fake.baseUrl }, () => Promise.resolve(null));
    const messages: Message[] = [...history().slice(0, 2), { role: "user", content: [{ type: "text", text: "NEW-PROMPT" }, { type: "image", mediaType: "image/jpeg", dataBase64: small }] }];
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loopOptions(fake, events, { provider, subagents: false, compactAtRatio: 0.8, messages }));
    assert.equal(out.status, "completed", `${out.reason ?? ""} ${out.message ?? ""}`);
    const summary = fake.requests[2]!.body;
    assert.ok(!summary.includes(small) && summary.includes("[image: image/jpeg, 8 bytes]") && summary.includes("[image: image/png, 1.1 MB]"));
    const retry = fake.requests[3]!.body;
    assert.ok(retry.includes(small) && !retry.includes(IMAGE.slice(0, 64)), "the prompt's own image is sent again, the history's is not");
  } finally {
    await fake.close();
  }
});
