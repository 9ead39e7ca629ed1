/**
 * The fake provider's in-stream errors are the events real servers send (a fake that invents a shape would let the
 * decoders pass against something no server says): the step names the dialect's own code or type, the fake sends the
 * whole event around it, and a name no server of that dialect sends is refused.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { ERROR_BODY_SECRET, renderTurn, type FakeApi } from "../fakes/provider-wire.js";

/** The `data` of the one error event a turn of only `streamError: code` renders, parsed; and its SSE event name. */
function errorEvent(api: FakeApi, code: string): { event: string | undefined; data: Record<string, unknown> } {
  const items = renderTurn(api, { steps: [{ streamError: code }], end: false }).filter((i): i is string => typeof i === "string");
  const last = items.at(-1)!;
  const event = /^event: (.*)\n/.exec(last)?.[1];
  const data = /^data: (.*)$/m.exec(last)![1]!;
  return { event, data: JSON.parse(data) as Record<string, unknown> };
}

/** The error's message with the leak marker the fake appends taken off. */
const message = (e: unknown): string => String((e as { message: unknown }).message).replace(` (${ERROR_BODY_SECRET})`, "");

it("Anthropic: `event: error` with {type:error, error:{type, message}} as the API sends it", () => {
  const { event, data } = errorEvent("anthropic", "overloaded_error");
  assert.equal(event, "error");
  assert.deepEqual(Object.keys(data), ["type", "error"]);
  assert.equal(data["type"], "error");
  assert.deepEqual(Object.keys(data["error"] as object), ["type", "message"]);
  assert.equal((data["error"] as { type: string }).type, "overloaded_error");
  assert.equal(message(data["error"]), "Overloaded");
  assert.ok(String((data["error"] as { message: string }).message).includes(ERROR_BODY_SECRET), "the leak marker rides in the message");
  // An overflow is an invalid_request_error whose message says so (no Anthropic error type names it).
  assert.match(message(errorEvent("anthropic", "invalid_request_error").data["error"]), /^prompt is too long: \d+ tokens > \d+ maximum$/);
  assert.throws(() => errorEvent("anthropic", "context_length_exceeded"), /Anthropic sends no in-stream error of type context_length_exceeded/);
});

it("Responses: `response.failed` whose response holds {code, message}", () => {
  const { event, data } = errorEvent("openai-responses", "context_length_exceeded");
  assert.equal(event, "response.failed");
  const resp = data["response"] as Record<string, unknown>;
  assert.equal(resp["status"], "failed");
  assert.equal(resp["object"], "response");
  assert.equal((resp["error"] as { code: string }).code, "context_length_exceeded");
  assert.equal(message(resp["error"]), "Your input exceeds the context window of this model. Please adjust your input and try again.");
  assert.throws(() => errorEvent("openai-responses", "overloaded_error"), /Responses sends no in-stream error of code overloaded_error/);
});

it("Chat Completions: an {error:{message, type, param, code}} chunk, the code where OpenAI puts it", () => {
  const overflow = errorEvent("openai-chat", "context_length_exceeded").data["error"] as Record<string, unknown>;
  assert.deepEqual({ ...overflow, message: message(overflow) }, {
    message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.",
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded",
  });
  const server = errorEvent("openai-chat", "server_error").data["error"] as Record<string, unknown>;
  assert.deepEqual({ ...server, message: message(server) }, {
    message: "The server had an error while processing your request. Sorry about that!",
    type: "server_error",
    param: null,
    code: null,
  });
  assert.throws(() => errorEvent("openai-chat", "overloaded_error"), /Chat Completions sends no in-stream error of code overloaded_error/);
});
