/**
 * Questions the model asks the user (the `question` tool), pending per session by server-generated ID.
 * Contracts:
 * - A question is one multiple-choice (`options`, 1..16 labels) and/or free-text (`allowText`) prompt; at least
 *   one way to answer exists (no options means free text).
 * - `ask` registers it, announces it synchronously (the door shows it), and resolves with the answer: `answered`
 *   (the chosen option's index and label, or the typed text), `declined` (the user chose not to answer), or
 *   `cancelled` (the turn was cancelled — the request is withdrawn, `onWithdrawn`).
 * - `defer` is the answer of a client that can only approve or decline (SCV): the model is told to ask in its reply.
 * - `answer(id, a)` answers a pending question once; an unknown or already-answered ID, an option index out of
 *   range, or text where only options are allowed is refused with a reason (nothing changes).
 */
import { randomUUID } from "../../store/random.js";

export const QUESTION_MAX_OPTIONS = 16;
export const QUESTION_MAX_OPTION_CHARS = 200;
export const QUESTION_MAX_TEXT_CHARS = 4000;
/** The longest free-text answer kept (longer answers are refused). */
export const ANSWER_MAX_CHARS = 16 * 1024;

export interface Question {
  /** The question, one paragraph (≤ 4,000 characters). */
  text: string;
  /** Choices, in order (empty: free text only). */
  options: string[];
  /** A typed answer is accepted (always true when there are no options). */
  allowText: boolean;
}

export type QuestionAnswer =
  | { kind: "answered"; option?: { index: number; label: string }; text?: string }
  | { kind: "declined" }
  /** The user's client can only approve or decline: the model asks again in its reply (see `answerText`). */
  | { kind: "deferred" }
  | { kind: "cancelled" };

/** What a door sends to answer: an option by index, free text, or a refusal to answer. */
export type AnswerInput = { option: number } | { text: string } | { decline: true } | { defer: true };

interface Pending {
  callId: string;
  question: Question;
  resolve: (a: QuestionAnswer) => void;
}

export class QuestionBook {
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly newId: () => string = randomUUID) {}

  get size(): number {
    return this.pending.size;
  }

  ask(callId: string, question: Question, signal: AbortSignal, announce: (id: string) => void, onWithdrawn: (id: string) => void): Promise<QuestionAnswer> {
    const id = this.newId();
    return new Promise<QuestionAnswer>((resolve) => {
      const onAbort = (): void => {
        if (!this.pending.delete(id)) return;
        onWithdrawn(id);
        resolve({ kind: "cancelled" });
      };
      this.pending.set(id, {
        callId,
        question,
        resolve: (a) => {
          signal.removeEventListener("abort", onAbort);
          resolve(a);
        },
      });
      signal.addEventListener("abort", onAbort, { once: true });
      announce(id);
      if (signal.aborted) onAbort();
    });
  }

  /** The pending question, if any. */
  get(id: string): { callId: string; question: Question } | undefined {
    const p = this.pending.get(id);
    return p === undefined ? undefined : { callId: p.callId, question: p.question };
  }

  answer(id: string, input: AnswerInput): { ok: true; callId: string; answer: QuestionAnswer } | { ok: false; error: string } {
    const p = this.pending.get(id);
    if (p === undefined) return { ok: false, error: "no pending question with that id" };
    let a: QuestionAnswer;
    if ("decline" in input) a = { kind: "declined" };
    else if ("defer" in input) a = { kind: "deferred" };
    else if ("option" in input) {
      const label = Number.isInteger(input.option) ? p.question.options[input.option] : undefined;
      if (label === undefined) return { ok: false, error: `option must be an index below ${p.question.options.length}` };
      a = { kind: "answered", option: { index: input.option, label } };
    } else {
      if (!p.question.allowText) return { ok: false, error: "this question accepts only one of its options" };
      if (input.text.length > ANSWER_MAX_CHARS) return { ok: false, error: `an answer is limited to ${ANSWER_MAX_CHARS} characters` };
      a = { kind: "answered", text: input.text };
    }
    this.pending.delete(id);
    p.resolve(a);
    return { ok: true, callId: p.callId, answer: a };
  }

  ids(): string[] {
    return [...this.pending.keys()];
  }
}

/** The text the model reads as the tool's result. */
export function answerText(a: QuestionAnswer): string {
  switch (a.kind) {
    case "answered":
      if (a.option !== undefined) return `The user chose option ${a.option.index + 1}: ${a.option.label}`;
      return `The user answered: ${a.text ?? ""}`;
    case "declined":
      return "The user declined to answer. Continue with your best judgement, or ask in your reply.";
    case "deferred":
      return "The user saw the question, but their client cannot answer it here. Ask it in your reply (with the choices, if any) and end your turn; the user answers in their next message.";
    case "cancelled":
      return "The question was withdrawn (the turn was cancelled).";
  }
}
