/**
 * A failed turn names its cause in one line, for each failure class: HTTP 401 with the provider's error category,
 * HTTP 404 for an unknown model with the catalog's closest models, HTTP 500 and 429 after their retries (a built-in
 * provider's too), an unreachable base URL, a stream dropped mid-answer, and the response and tool-call limits (which
 * limit). The provider's error text (which may hold part of a key) never reaches the terminal.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ERROR_BODY_SECRET, startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { chat, chatEnv, FAKE } from "./helpers.js";

describe("berth chat turn failure lines", () => {
  let fake: FakeProvider;
  let h: string;
  before(async () => {
    fake = await startFakeProvider();
    h = mkdtempSync(join(tmpdir(), "berth-fail-"));
    const def = { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none" };
    writeFileSync(join(h, "settings.json"), JSON.stringify({ providers: { fake: { ...def, models: [{ id: "fake-model" }] }, cat: def, down: { ...def, base_url: "http://127.0.0.1:1/v1", models: [{ id: "fake-model" }] }, downKeyed: { ...def, base_url: "http://me:pw-SECRETMARKER@127.0.0.1:1/v1?key=sk-SECRETMARKER0123456789abcdef", models: [{ id: "fake-model" }] }, tlsOnPlain: { ...def, base_url: `https://127.0.0.1:${fake.port}/v1`, models: [{ id: "fake-model" }] } } }));
  });
  after(() => fake.close());

  const run = async (env: Record<string, string> = FAKE): Promise<{ code: number | null; out: string; err: string }> => {
    const p = chat(["-p", "hi"], chatEnv(h, env));
    const code = await p.exited;
    assert.doesNotMatch(p.stderr, /\n\s+at |Error:/);
    assert.ok(!p.stderr.includes(ERROR_BODY_SECRET), "the provider's error text leaked");
    return { code, out: p.stdout, err: p.stderr };
  };

  it("HTTP 401 names the status and the provider's category (Anthropic and OpenAI bodies)", async () => {
    fake.script([{ status: 401, body: JSON.stringify({ type: "error", error: { type: "authentication_error", message: `invalid x-api-key ${ERROR_BODY_SECRET}` } }) }]);
    let r = await run();
    assert.equal(r.code, 1);
    assert.match(r.err, /^berth chat: the turn failed \(provider_error: the provider credential is missing or was rejected: provider rejected the credential \(HTTP 401 authentication_error\); sign in again or set the API key\)$/m);
    fake.script([{ status: 401, body: JSON.stringify({ error: { message: `Incorrect API key provided: sk-${ERROR_BODY_SECRET}`, type: "invalid_request_error", code: "invalid_api_key" } }) }]);
    r = await run();
    assert.match(r.err, /HTTP 401 invalid_api_key/);
  });

  it("HTTP 404 for an unknown model lists the provider's closest models", async () => {
    fake.setModels([{ id: "gpt-4.1-mini" }, { id: "gpt-4.1" }, { id: "o3" }]);
    fake.script([{ status: 404, body: JSON.stringify({ error: { message: `The model ${ERROR_BODY_SECRET} does not exist`, type: "invalid_request_error", code: "model_not_found" } }) }]);
    const r = await run({ MC_PROVIDER: "cat", MC_MODEL: "gpt-4.1-mimi" });
    assert.equal(r.code, 1);
    assert.match(r.err, /provider returned an error status \(HTTP 404 model_not_found\)/);
    assert.match(r.err, /^berth chat: MC_MODEL=gpt-4\.1-mimi is not a model of provider cat \(did you mean gpt-4\.1-mini\?\)$/m);
  });

  it("the interactive chat prints the same cause and the suggestions after its turn line", async () => {
    fake.setModels([{ id: "gpt-4.1-mini" }, { id: "o3" }]);
    fake.script([{ status: 404, body: JSON.stringify({ type: "error", error: { type: "not_found_error", message: `model: ${ERROR_BODY_SECRET}` } }) }]);
    // A home whose catalog of cat was never read: the setup checks cannot tell the model is unknown (piped prompts
    // would not run past them), so the turn is sent and fails.
    const fresh = mkdtempSync(join(tmpdir(), "berth-fail-"));
    copyFileSync(join(h, "settings.json"), join(fresh, "settings.json"));
    const p = chat([], chatEnv(fresh, { MC_PROVIDER: "cat", MC_MODEL: "gpt-4.1-mimi" }), { stdin: "hi\n" });
    assert.equal(await p.exited, 1);
    assert.ok(!p.stdout.includes(ERROR_BODY_SECRET));
    assert.match(p.stdout, /── failed \(provider_error: the provider request failed: provider returned an error status \(HTTP 404 not_found_error\)\) · [^\n]*\n(?:error: )?MC_MODEL=gpt-4\.1-mimi is not a model of provider cat \(did you mean gpt-4\.1-mini\?\)\n/);
  });

  it("HTTP 500 says it was retried", async () => {
    const before = fake.requests.length;
    fake.script([{ status: 500 }, { status: 500 }, { status: 500 }]);
    const r = await run();
    assert.equal(r.code, 1);
    assert.equal(fake.requests.length - before, 3);
    assert.match(r.err, /the turn failed \(provider_error: the provider request failed: provider overloaded or unavailable \(HTTP 500 fake_error; 3 attempts\); the provider is failing or overloaded: send the prompt again in a minute\)$/m);
  });

  it("HTTP 429 with Retry-After is retried, then names the rate limit and the fix", async () => {
    const before = fake.requests.length;
    const limited = { status: 429, headers: { "retry-after": "0" } };
    fake.script([limited, limited, limited]);
    const r = await run();
    assert.equal(r.code, 1);
    assert.equal(fake.requests.length - before, 3);
    assert.match(r.err, /the turn failed \(provider_error: the provider request failed: provider rate limit \(HTTP 429 fake_error; 3 attempts\); the provider limits how often this key may ask: wait a minute, then send the prompt again\)$/m);
  });

  it("a built-in provider's rate limit gets the same wait-and-retry hint (no base URL of its own to name)", async () => {
    const limited = { status: 429, headers: { "retry-after": "0" } };
    fake.script([limited, limited, limited]);
    const r = await run({ MC_PROVIDER: "anthropic", MC_MODEL: "claude-sonnet-4-5", ANTHROPIC_BASE_URL: `http://127.0.0.1:${fake.port}`, ANTHROPIC_API_KEY: "sk-ant-test" });
    assert.equal(r.code, 1);
    assert.match(r.err, /provider rate limit \(HTTP 429 [^)]*\); the provider limits how often this key may ask: wait a minute, then send the prompt again\)$/m);
  });

  it("an unreachable base URL is named", async () => {
    const r = await run({ MC_PROVIDER: "down", MC_MODEL: "fake-model" });
    assert.equal(r.code, 1);
    assert.match(r.err, /provider connection failed \(ECONNREFUSED; 3 attempts\); is http:\/\/127\.0\.0\.1:1\/v1 reachable\?\)$/m);
    // A password or key in the URL (user info, query) is never shown; where it points still is.
    const k = await run({ MC_PROVIDER: "downKeyed", MC_MODEL: "fake-model" });
    assert.equal(k.code, 1);
    assert.ok(k.err.includes("; is http://…@127.0.0.1:1/v1?… reachable?)\n"), k.err);
    assert.doesNotMatch(k.err + k.out, /SECRETMARKER|pw-|me:/);
  });

  it("an https base URL whose server speaks plain HTTP: named as no TLS there, with the http:// URL to use", async () => {
    const r = await run({ MC_PROVIDER: "tlsOnPlain", MC_MODEL: "fake-model" });
    assert.equal(r.code, 1);
    const url = `https://127.0.0.1:${fake.port}/v1`;
    const want = `provider connection failed (EPROTO; 3 attempts); ${url} did not complete a TLS handshake: if that server speaks plain HTTP, set the provider's base_url to http://127.0.0.1:${fake.port}/v1 in settings.json)`;
    assert.ok(r.err.includes(`${want}\n`), r.err);
  });

  it("a base URL that answers with a web page is named, with the fix, and not retried", async () => {
    const before = fake.requests.length;
    fake.script([{ body: "<html><body>Open WebUI</body></html>", headers: { "content-type": "text/html" } }]);
    const r = await run();
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /the turn failed \(provider_error: the provider request failed: provider did not answer with an event stream \(HTML page\); check the provider's base_url in settings\.json: it must name the API \(for OpenAI-compatible servers usually ending in \/v1\), not a web page, on a server that streams answers \(server-sent events\); it is set to http:\/\/127\.0\.0\.1:\d+\/v1\)$/m,
    );
    assert.equal(fake.requests.length - before, 1);
  });

  it("a bare HTTP 404 (no error category) points at base_url", async () => {
    fake.script([{ status: 404, body: "<html>Cannot POST /chat/completions</html>" }]);
    const r = await run();
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /the turn failed \(provider_error: the provider request failed: provider returned an error status \(HTTP 404\); check the provider's base_url in settings\.json \(OpenAI-compatible servers usually want it to end in \/v1\) and the model name; it is set to http:\/\/127\.0\.0\.1:\d+\/v1\)$/m,
    );
  });

  it("a request the provider refuses as longer than the model's window is a context_limit failure with the fix", async () => {
    fake.script([{ status: 400, body: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `prompt is too long: 9000 tokens > 8192 maximum ${ERROR_BODY_SECRET}` } }) }]);
    const r = await run();
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /the turn failed \(context_limit: the provider refused the request as longer than the model's context window \(provider returned an error status \(HTTP 400 context_length_exceeded\)\); Berth compacts from its own estimate against the window it knows for the model, which is larger than the real one: set this model's context_window in settings\.json to its real size, or clear the session\)$/m,
    );
  });

  it("a stream dropped mid-answer keeps the text so far and says the stream ended", async () => {
    fake.script([{ steps: [{ text: "half an ans" }, { disconnect: true }], end: false }]);
    const r = await run();
    assert.equal(r.code, 1);
    assert.equal(r.out, "half an ans\n");
    const sid = /^session (\S+)$/m.exec(r.err)![1]!;
    assert.match(r.err, new RegExp(`the turn failed \\(provider_error: the provider request failed: provider stream ended unexpectedly \\(ECONNRESET\\); the session keeps the answer so far: berth chat --session ${sid} continues it\\)$`, "m"));
  });

  it("interactive: a stream dropped mid-answer says the answer so far is kept and how to go on; the next turn sees it", async () => {
    fake.script([{ steps: [{ text: "first half" }, { disconnect: true }], end: false }]);
    const p = chat([], chatEnv(h, FAKE), { stdin: "start\ngo on\n" });
    assert.equal(await p.exited, 1);
    assert.match(p.stdout, /first half\n── failed \(provider_error: [^\n]*provider stream ended unexpectedly \(ECONNRESET\); the session keeps the answer so far: send a prompt \(such as "continue"\) to go on\) · /);
    await p.until(/echo: go on\n── completed/);
    assert.match(fake.requests.at(-1)!.body, /first half/);
  });

  it("the response and tool-call limits are named, each with what to do", async () => {
    // 33 tool calls in one response: one past the limit of 32.
    const calls = Array.from({ length: 33 }, (_, i) => ({ toolCall: { name: "read", arguments: { path: `f${i}` } } }));
    fake.script([{ steps: calls }]);
    let r = await run();
    assert.equal(r.code, 1);
    assert.match(r.err, /the turn failed \(tool_limit: the provider's tool calls exceeded a size or count limit: more than 32 tool calls in one response; ask the model for fewer tool calls at a time\)/);
    // An answer over the 1 MiB assistant-text limit.
    fake.script([{ steps: [{ text: "x".repeat(1024 * 1024 + 1), chunks: 16 }] }]);
    r = await run();
    assert.equal(r.code, 1);
    assert.match(r.err, /the turn failed \(response_limit: the provider response exceeded a size limit: assistant text exceeds 1 MiB; ask for a shorter answer, or split the task into smaller steps\)/);
  });
});
