/**
 * The Chat Completions decoder's template path (src/runtime/providers/openai-chat.ts, `ChatDecoder.learn`): an event
 * that repeats an earlier plain text event but for its text is decoded without JSON.parse. It must give exactly what
 * JSON.parse gives for every input: here each stream is decoded twice, with templates and with JSON.parse only
 * (`templates: false`), and the two must push the same events and fail the same way, event by event.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ChatDecoder } from "../../src/runtime/providers/openai-chat.js";
import { ProviderFailure } from "../../src/runtime/providers/errors.js";
import { PROVIDER_BOUNDS, type ProviderEvent } from "../../src/runtime/types.js";

type Outcome = { events: ProviderEvent[]; failure: string | null; at: number };

function decode(datas: string[], templates: boolean, bounds = PROVIDER_BOUNDS): Outcome & { templated: number } {
  const d = new ChatDecoder(bounds, templates);
  const events: ProviderEvent[] = [];
  let i = 0;
  try {
    for (; i < datas.length; i++) d.onEvent(undefined, datas[i]!, events);
    if (!d.finished) d.onEnd(events);
  } catch (e) {
    assert.ok(e instanceof ProviderFailure, `a ProviderFailure, not ${String(e)}`);
    return { events, failure: `${e.kind}: ${e.label}`, at: i, templated: d.templated };
  }
  return { events, failure: null, at: i, templated: d.templated };
}

/** Decodes both ways and asserts the same result; returns how many events the template path took. */
function same(datas: string[], bounds = PROVIDER_BOUNDS): number {
  const fast = decode(datas, true, bounds);
  const ref = decode(datas, false, bounds);
  assert.equal(ref.templated, 0);
  assert.deepEqual({ events: fast.events, failure: fast.failure, at: fast.at }, { events: ref.events, failure: ref.failure, at: ref.at }, JSON.stringify(datas).slice(0, 400));
  return fast.templated;
}

const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, finish: string | null = null): string =>
  JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", ...extra, choices: [{ index: 0, delta, finish_reason: finish }] });
const text = (content: string): string => chunk({ content });
const STOP = chunk({}, {}, "stop");
const USAGE = JSON.stringify({ id: "chatcmpl-1", choices: [], usage: { prompt_tokens: 3, completion_tokens: 4 } });

/** Text-event data whose literal is written as given (raw: not JSON-escaped by us). */
const raw = (literal: string): string => text("\u0001").replace('"\\u0001"', `"${literal}"`);

const CONTENTS = [
  "word ", "", "a", " ", "café", "😀 ok", "日本語", "tab\there", "line\nbreak", 'quote"d', "back\\slash", "\u0000", "\u001f",
  '"content":"', 'x","content":"y', "\u2028\u2029", "\ud800", "\udfff", "x".repeat(300), "é".repeat(40), "\u007f", "/",
];
/** Literals written raw: valid ones with escapes or lone surrogates, and invalid ones JSON.parse rejects. */
const RAW = [
  "\\u0041", "\\\"", "\\\\", "\\n", "\\/", "\\ud83d\\ude00", "\ud83d", "\udc00x", "é", // valid
  "a\"b", "a\nb", "\t", "\\", "\\x", "a\\", '","x":"y', '"}]},{"index":0,"delta":{"content":"z', // invalid or restructuring
];

test("plain text streams take the template path and decode as JSON.parse does", () => {
  const datas = [chunk({ role: "assistant", content: "" }), ...Array.from({ length: 200 }, (_, i) => text(`w${i} `)), STOP, USAGE, "[DONE]"];
  const templated = same(datas);
  assert.ok(templated >= 198, `template path taken (${templated} events)`);
  const out = decode(datas, true).events;
  assert.equal(out.filter((e) => e.type === "text_delta").map((e) => (e.type === "text_delta" ? e.text : "")).join(""), Array.from({ length: 200 }, (_, i) => `w${i} `).join(""));
});

test("every content, escaped, unicode, raw or invalid literal after a learned template decodes as JSON.parse does", () => {
  for (const c of CONTENTS) same([text("x"), text("y"), text(c), text("z"), STOP, "[DONE]"]);
  for (const r of RAW) same([text("x"), text("y"), raw(r), text("z"), STOP, "[DONE]"]);
  // Learned from an event whose own literal was escaped or raw.
  for (const r of RAW) same([raw(r), text("a"), text("b"), STOP, "[DONE]"]);
  for (const c of CONTENTS) same([text(c), text("a"), text(c), STOP, "[DONE]"]);
});

test("events that differ elsewhere, tool calls, reasoning, errors and other shapes decode as JSON.parse does", () => {
  const call = (index: number, args: string, head = false): string =>
    chunk({ tool_calls: [{ index, ...(head ? { id: `call_${index}`, type: "function", function: { name: "read", arguments: "" } } : { function: { arguments: args } }) }] });
  const shapes = [
    text("a"),
    chunk({ content: "b" }, { model: "other" }),
    chunk({ content: "c", role: "assistant" }),
    chunk({ reasoning_content: "think" }),
    chunk({ reasoning: "more" }),
    chunk({ content: "d", reasoning_content: "both" }),
    chunk({ content: "e" }, {}, "length"),
    chunk({ content: "f" }, { usage: { prompt_tokens: 1, completion_tokens: 2 } }),
    chunk({ content: null }),
    chunk({ content: 5 }),
    call(0, "", true),
    call(0, '{"p":'),
    call(0, '"x"}'),
    JSON.stringify({ id: "chatcmpl-1", choices: [{ index: 1, delta: { content: "other choice" } }] }),
    JSON.stringify({ id: "chatcmpl-1", choices: [{ index: 0, delta: { content: "g" } }, { index: 1, delta: { content: "h" } }] }),
    JSON.stringify({ choices: [{ index: 0, delta: { content: "first", content2: 1 } }] }),
    '{"choices":[{"index":0,"delta":{"content":"dup1","content":"dup2"}}]}',
    '{"choices":[{"index":0,"delta":{"content":"n"}}],"x":{"content":"nested after"}}',
    '{"x":{"content":"nested before"},"choices":[{"index":0,"delta":{"content":"n2"}}]}',
    '{ "choices" : [ { "index" : 0 , "delta" : { "content" : "spaced" } } ] }',
    '{"choices":[{"index":0,"delta":{"content" :"spaced key"}}]}',
    JSON.stringify({ error: { message: "boom", type: "server_error" } }),
    '{"choices":[{"index":0,"delta":{"content":"x"}}]',
    "[]",
    "not json",
    USAGE,
  ];
  for (const a of shapes) for (const b of shapes) same([text("p"), a, text("q"), b, text("r"), text("s"), STOP, "[DONE]"]);
  // A plain string under another `content` key, after the delta's: never taken for the text.
  const nested = (c: string, n: string): string => `{"choices":[{"index":0,"delta":{"content":"${c}"}}],"x":{"content":"${n}"}}`;
  same([nested("a", "t1"), nested("a", "t2"), nested("b", "t3"), STOP, "[DONE]"]);
  // A learned template followed by the same event with a different head or tail.
  for (const a of shapes) same([a, a.replace('"x"', '"y"'), a, STOP, "[DONE]"]);
});

test("random mixes decode as JSON.parse does", () => {
  let seed = 19;
  const rnd = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const pool = [...CONTENTS.map(text), ...RAW.map(raw), STOP, USAGE, chunk({ reasoning_content: "r" }), chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "n", arguments: "{}" } }] })];
  for (let k = 0; k < 300; k++) {
    const datas: string[] = [];
    const n = 1 + rnd(12);
    for (let i = 0; i < n; i++) datas.push(rnd(3) === 0 ? pool[rnd(pool.length)]! : text(CONTENTS[rnd(CONTENTS.length)]!));
    if (rnd(2) === 0) datas.push("[DONE]");
    same(datas);
  }
});

test("the text bound holds exactly on the template path: at the bound passes, one byte past fails", () => {
  const bounds = { ...PROVIDER_BOUNDS, maxAssistantTextBytes: 60 };
  const at = [text(""), ...Array.from({ length: 10 }, () => text("abcdé")), STOP, "[DONE]"]; // 10 × 6 bytes
  assert.ok(same(at, bounds) >= 9);
  assert.equal(decode(at, true, bounds).failure, null);
  const past = [text(""), ...Array.from({ length: 10 }, () => text("abcdé")), text("z"), STOP, "[DONE]"];
  assert.ok(same(past, bounds) >= 9);
  const r = decode(past, true, bounds);
  assert.equal(r.failure?.startsWith("limit: "), true, String(r.failure));
  assert.equal(r.at, 11, "the delta one byte past the bound fails");
});
