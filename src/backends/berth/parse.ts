/**
 * Parsing of the Berth backend's command payloads (`configure`, `complete_input`) and the history turns it sends.
 * Contracts: every function is total over JSON input and returns a value or a fixed error message.
 */
import { THINKING_LEVELS, type ThinkingLevel } from "../../core/thinking.js";
import type { AnswerInput, Question, QuestionAnswer, SelectionOverride } from "../../runtime/session/index.js";
import type { TranscriptTurn } from "../../runtime/session/transcript.js";
import type { Json } from "../../core/json-bounds.js";

const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** The question ID of an input request, and the option IDs of its choices. */
export const QUESTION_FIELD = "answer";
export const optionId = (i: number): string => `o${i}`;

export interface Configure {
  model?: { provider: string; id: string };
  thinkingLevel?: ThinkingLevel;
}

export function parseConfigure(cmd: Json): Configure | string {
  const out: Configure = {};
  if (cmd.model !== undefined) {
    const m = cmd.model;
    if (!isObj(m) || typeof m.provider !== "string" || typeof m.id !== "string" || m.provider === "" || m.id === "") return "model must be {provider, id}";
    out.model = { provider: m.provider, id: m.id };
  }
  if (cmd.thinkingLevel !== undefined) {
    const t = cmd.thinkingLevel;
    if (typeof t !== "string" || !(THINKING_LEVELS as readonly string[]).includes(t)) return `thinkingLevel must be one of ${THINKING_LEVELS.join(", ")}`;
    out.thinkingLevel = t as ThinkingLevel;
  }
  if (out.model === undefined && out.thinkingLevel === undefined) return "configure needs model or thinkingLevel";
  return out;
}

/** The session selection for a stored model / reasoning level. */
export function selectionOf(model: { provider: string; id: string } | undefined, thinking: string | undefined): SelectionOverride | undefined {
  const sel: SelectionOverride = {};
  if (model !== undefined) {
    sel.provider = model.provider;
    sel.model = model.id;
  }
  if (thinking !== undefined && (THINKING_LEVELS as readonly string[]).includes(thinking)) sel.reasoning = thinking as ThinkingLevel;
  return Object.keys(sel).length > 0 ? sel : undefined;
}

/** A question as a neutral input request of the running turn. */
export function inputRequest(questionId: string, turnId: string, q: Question): Json {
  const hasOptions = q.options.length > 0;
  const question: Json = {
    id: QUESTION_FIELD,
    kind: hasOptions ? "single_select" : "text",
    message: q.text,
    required: true,
  };
  if (hasOptions) {
    question.options = q.options.map((label, i) => ({ id: optionId(i), label }));
    if (q.allowText) question.allowFreeform = true;
  }
  const r: Json = { id: questionId, message: q.text, questions: [question] };
  if (turnId !== "") r.turnId = turnId;
  return r;
}

/**
 * A `complete_input` as an answer: `decline`/`cancel` decline; `accept` needs `answers.answer` — an AHP answer
 * (`{state, value: {kind: "selected", value: "o1"}}` or `{kind: "text", value}`), or a bare option ID or text.
 */
export function parseAnswer(cmd: Json, q: Question): AnswerInput | string {
  if (cmd.response === "decline" || cmd.response === "cancel") return { decline: true };
  if (cmd.response !== "accept") return "response must be accept, decline or cancel";
  const answers = cmd.answers;
  const raw = isObj(answers) ? answers[QUESTION_FIELD] : undefined;
  let v: unknown = raw;
  if (isObj(v) && v.value !== undefined) v = v.value;
  let kind: unknown = undefined;
  if (isObj(v)) {
    kind = v.kind;
    v = Array.isArray(v.value) ? (v.value as unknown[])[0] : v.value;
  }
  if (typeof v !== "string") return `an accepted answer needs answers.${QUESTION_FIELD}`;
  if (kind !== "text") {
    const i = q.options.findIndex((_, k) => optionId(k) === v);
    if (i !== -1) return { option: i };
    if (kind === "selected") return "unknown option id";
  }
  return { text: v };
}

/** How the runtime resolved a question, as `input_resolved` fields. */
export function resolution(a: QuestionAnswer): Json {
  switch (a.kind) {
    case "answered": {
      const value = a.option !== undefined ? { kind: "selected", value: optionId(a.option.index) } : { kind: "text", value: a.text ?? "" };
      return { response: "accept", answers: { [QUESTION_FIELD]: { state: "submitted", value } } };
    }
    case "declined":
    case "deferred":
      return { response: "decline" };
    case "cancelled":
      return { response: "cancel" };
  }
}

/** The longest text of a history turn or source snapshot the host takes (the wire's per-field bound, UTF-16 units). */
export const HISTORY_TEXT_MAX = 1024 * 1024;
const CLIPPED = "\n\n[Berth: the rest of this text is in the session's own history.]";

/** `text` within HISTORY_TEXT_MAX: its head and a notice (never splitting a surrogate pair). */
export function clipHistoryText(text: string): string {
  if (text.length <= HISTORY_TEXT_MAX) return text;
  let n = HISTORY_TEXT_MAX - CLIPPED.length;
  if (/[\uD800-\uDBFF]/.test(text[n - 1]!)) n--;
  return text.slice(0, n) + CLIPPED;
}

/**
 * A stored turn as a backend history turn (texts within the wire's bound). A turn that did not complete — cancelled,
 * failed, or cut by a crash (closed `failed` by the next process) — is `cancelled`: the one state a history turn has
 * besides complete (the spec: incomplete output is reported, never passed off as a successful transcript).
 */
export function historyTurn(t: TranscriptTurn): Json {
  const h: Json = { id: t.id, startedAt: t.startedAt, userText: clipHistoryText(t.userText) };
  if (t.responseText !== "") h.responseText = clipHistoryText(t.responseText);
  if (!t.completed) h.cancelled = true;
  return h;
}
