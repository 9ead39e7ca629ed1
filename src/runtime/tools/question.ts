/**
 * `question {question, options?, allow_text?}`: the model asks the user a multiple-choice or free-text question and
 * waits for the answer. Risk `read_only` (it touches nothing). A session-bound tool: it is offered only to
 * sessions whose door can put a question to a person (see `SessionHub.questionTools`); the door answers through
 * `SessionRuntime.answerQuestion`. The result tells the model the chosen option or the typed text, that the user
 * declined, or that the question was withdrawn.
 */
import * as A from "../../core/arg-schema.js";
import type { Tool } from "../types.js";
import { defineLocalTool } from "./define.js";
import { ok } from "./result.js";
import { answerText, QUESTION_MAX_OPTIONS, QUESTION_MAX_OPTION_CHARS, QUESTION_MAX_TEXT_CHARS, type Question, type QuestionAnswer } from "../session/questions.js";

export const QUESTION_TOOL_NAME = "question";

const QuestionArgs = A.object({
  question: A.string({ min: 1, max: QUESTION_MAX_TEXT_CHARS, description: "The question, in one short paragraph." }),
  options: A.optional(
    A.array(A.string({ min: 1, max: QUESTION_MAX_OPTION_CHARS }), {
      max: QUESTION_MAX_OPTIONS,
      description: `Choices the user picks one of (at most ${QUESTION_MAX_OPTIONS}); omit for a free-text question.`,
    }),
  ),
  allow_text: A.optional(A.boolean({ description: "With options: the user may also type an answer of their own. Default false." })),
});

/** Puts a question to the session's user; resolves with the answer (or `cancelled` when the signal fires). */
export type AskUser = (q: Question, callId: string, signal: AbortSignal) => Promise<QuestionAnswer>;

export function createQuestionTool(ask: AskUser): Tool {
  return defineLocalTool({
    name: QUESTION_TOOL_NAME,
    risk: "read_only",
    description:
      "Ask the user a question and wait for the answer: give `options` for a multiple-choice question (the user picks " +
      "one), or leave them out for a free-text answer. Use it only when you cannot proceed sensibly without the " +
      "user's decision; do not use it for small choices you can make yourself.",
    schema: QuestionArgs,
    async execute(args, ctx) {
      const options = args.options ?? [];
      const q: Question = { text: args.question, options, allowText: options.length === 0 || args.allow_text === true };
      const a = await ask(q, ctx.callId ?? "", ctx.signal);
      return ok(answerText(a));
    },
  });
}
