/**
 * A delegated agent's result (`{agent, status, reply, …}`, agent-berth.ts and cli-agents.ts) as JSON text within a
 * bound, never cut through its JSON.
 *
 * Contract:
 * - The result is whole when it fits. Else the reply keeps its start, cut on a character boundary to the longest
 *   prefix with which the whole result fits, and the result says what was left out: `truncated: true`,
 *   `reply_bytes` (the whole reply's size), `reply_omitted_bytes` and `note` (those numbers, the bound, and how to
 *   get the rest: by continuing the conversation, when there is one; Berth keeps no copy of it).
 * - Only when even an empty reply does not fit (a job tool's answer with little room left) are `stderr_tail` (its end
 *   kept), then `error` cut, then `denied` left out, each said in `note`. A result that cannot fit even so is null.
 * - Fitting a result fitted before (a job's result shown in a job tool's answer) counts from the whole reply's size
 *   it recorded, so the numbers stay those of the agent's reply.
 */
import { truncateUtf8 } from "../../core/utf8.js";
import { MAX_RESULT_BYTES } from "../../runtime/tools/result.js";

export interface FitBound {
  /** Largest `measure` of the JSON text. */
  max: number;
  /** Size of the JSON text as it is counted against `max` (default: its UTF-8 bytes). */
  measure?: (json: string) => number;
  /** The bound in words, for the note: "the 51200-byte bound of a tool result". */
  words: string;
}

/** A delegated agent's result as a tool result: within the bound of any tool result, which would cut its JSON. */
export const RESULT_BOUND: FitBound = { max: MAX_RESULT_BYTES, words: `the ${MAX_RESULT_BYTES}-byte bound of a tool result` };

type Body = Record<string, unknown> & { reply: string };

const utf8 = (json: string): number => Buffer.byteLength(json);

/** The last at most `max` bytes of `s`, starting on a character boundary. */
function tailUtf8(s: string, max: number): string {
  const b = Buffer.from(s);
  if (b.length <= max) return s;
  let start = b.length - max;
  while (start < b.length && (b[start]! & 0xc0) === 0x80) start++;
  return b.subarray(start).toString("utf8");
}

/**
 * The longest cut of `text` (by `cut(text, bytes)`) with which `measure(build(cut))` is at most `max`, or null when
 * not even the empty cut fits. Each round drops at least the bytes the JSON is over by (a byte of text is at least a
 * byte of JSON), so a text JSON escapes heavily may end shorter than it could be, never longer.
 */
function longestFit(text: string, cut: (s: string, bytes: number) => string, build: (s: string) => string, max: number, measure: (json: string) => number): string | null {
  let bytes = Buffer.byteLength(text);
  let s = text;
  for (;;) {
    const over = measure(build(s)) - max;
    if (over <= 0) return s;
    if (bytes === 0) return null;
    const next = Math.max(0, bytes - Math.max(1, over));
    s = next < 4 ? "" : cut(s, next);
    // truncateUtf8 keeps at least one character: a cut that did not shrink ends with nothing.
    const got = Buffer.byteLength(s);
    bytes = got < bytes ? got : 0;
    if (bytes === 0) s = "";
  }
}

/** `body` (its `reply` the reply text Berth has, `reply_bytes` the whole reply's size when that is more) within `b`. */
export function fitAgentResult(body: Body, b: FitBound): string | null {
  const measure = b.measure ?? utf8;
  const whole = typeof body["reply_bytes"] === "number" ? body["reply_bytes"] : Buffer.byteLength(body.reply);
  const plain: Record<string, unknown> = { ...body };
  for (const k of ["reply_bytes", "reply_omitted_bytes", "note"]) delete plain[k];
  if (whole <= Buffer.byteLength(body.reply)) {
    const json = JSON.stringify({ ...plain, truncated: false });
    if (measure(json) <= b.max) return json;
  }
  const session = typeof body["session"] === "string" ? body["session"] : null;
  const notes: string[] = [];
  const build = (o: Record<string, unknown>, reply: string, more: string[]): string => {
    const omitted = whole - Buffer.byteLength(reply);
    const note = [
      `the reply is ${whole} bytes; its last ${omitted} bytes are left out to fit ${b.words}. Berth keeps no more of it: ${
        session !== null ? `continue the conversation (session "${session}") and ask the agent for the rest` : "ask the agent again for what is missing"
      }`,
      ...more,
    ].join("; ");
    return JSON.stringify({ ...o, reply, truncated: true, reply_bytes: whole, reply_omitted_bytes: omitted, note });
  };
  let o = plain;
  const reply = longestFit(body.reply, truncateUtf8, (r) => build(o, r, notes), b.max, measure);
  if (reply !== null) return build(o, reply, notes);
  // Even an empty reply does not fit: the other long fields go too, the least useful last.
  const shrink = (key: string, keepEnd: boolean, what: (kept: number, was: number) => string): string | null => {
    const v = o[key];
    if (typeof v !== "string" || v === "") return null;
    const was = Buffer.byteLength(v);
    const cut = (s: string, n: number): string => (keepEnd ? tailUtf8(s, n) : truncateUtf8(s, n));
    const fit = longestFit(v, cut, (s) => build({ ...o, [key]: s }, "", [...notes, what(Buffer.byteLength(s), was)]), b.max, measure) ?? "";
    notes.push(what(Buffer.byteLength(fit), was));
    o = { ...o, [key]: fit };
    return fit === "" && measure(build(o, "", notes)) > b.max ? null : build(o, "", notes);
  };
  const fitted =
    shrink("stderr_tail", true, (k, w) => `stderr_tail is its last ${k} of ${w} bytes`) ?? shrink("error", false, (k, w) => `error is its first ${k} of ${w} bytes`);
  if (fitted !== null) return fitted;
  if (Array.isArray(o["denied"])) {
    notes.push(`denied (${o["denied"].length} entries) is left out`);
    const { denied: _dropped, ...rest } = o;
    o = rest;
  }
  const last = build(o, "", notes);
  return measure(last) <= b.max ? last : null;
}

/** `content` re-fitted within `b` when it is a delegated agent's result, else null. */
export function refitAgentResult(content: string, b: FitBound): string | null {
  let v: unknown;
  try {
    v = JSON.parse(content);
  } catch {
    return null;
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  if (typeof o["agent"] !== "string" || typeof o["reply"] !== "string") return null;
  return fitAgentResult(o as Body, b);
}
