/** An OpenAI Chat Completions SSE body answering `text` in one delta, then `stop` and `[DONE]` (for tiny fake servers). */
export function chatSse(text: string): string {
  const chunk = (delta: Record<string, unknown>, finish: string | null): string =>
    `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  return chunk({ role: "assistant", content: text }, null) + chunk({}, "stop") + "data: [DONE]\n\n";
}
