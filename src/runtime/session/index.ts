/**
 * The session runtime: the one stateful session object every door projects (app-service turns, the host's Berth
 * backend, SCV, ACP, chat channels). Doors import from here only.
 */
export { SessionHub, type SessionHubOptions } from "./hub.js";
export { SessionRuntime } from "./runtime.js";
export { admissionError, type SessionDeps, type StartResult, type StartedTurn, type TurnRunner } from "./deps.js";
export { needsApproval, approvalSummary } from "./approvals.js";
export { attachmentNote, MAX_ATTACHMENTS, MAX_IMAGE_BYTES } from "./attachments.js";
export * from "./types.js";
export { answerText, QUESTION_MAX_OPTIONS, ANSWER_MAX_CHARS, type AnswerInput } from "./questions.js";
export type { RuntimeEvent, TurnSink, TurnOutcome, TurnUsage, FailureReason } from "../events.js";
// What a turn that did not complete ends with in the model's context, and so in a replay that shows it (ACP's).
export { TURN_INTERRUPTED } from "../history.js";
