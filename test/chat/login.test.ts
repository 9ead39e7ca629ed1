/**
 * `/login` in the interactive `berth chat`, end to end through a pseudo-terminal (util-linux `script`), against the
 * real spawned service, the loopback fake OAuth issuer (BERTH_OPENAI_AUTH_ISSUER; BERTH_OPENAI_AUTH_CALLBACK_PORT=0)
 * and the loopback fake provider (BERTH_OPENAI_CODEX_BASE_URL). The test plays the browser at the issuer for the
 * authorization URL the chat shows, then pastes the final redirect URL (or its bare code) into the chat.
 * Every code and token the issuer mints contains SECRETMARKER: apart from what the test itself pasted, no marker may
 * reach the terminal, and nothing prints a stack trace.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const MARKER = "SECRETMARKER";
const NOT_READY = /No model provider is ready/;

describe("berth chat /login (pty)", { skip: hasScript ? false : "util-linux script is not installed", timeout: 60_000 }, () => {
  let provider: FakeProvider;
  let issuer: FakeOAuthIssuer;
  const procs: Proc[] = [];

  before(async () => {
    provider = await startFakeProvider();
    issuer = await FakeOAuthIssuer.start();
  });
  afterEach(() => {
    // A failed assertion must not leave a chat (and its service) running.
    for (const p of procs.splice(0)) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGTERM");
  });
  after(async () => {
    await provider.close();
    await issuer.close();
  });

  /** A chat on an empty home selecting openai-codex; waits for its first prompt (no provider is ready yet). */
  async function startChat(): Promise<Proc> {
    const env = {
      ...chatEnv(home(), {
        MC_PROVIDER: "openai-codex",
        MC_MODEL: "gpt-5-codex",
        BERTH_OPENAI_AUTH_ISSUER: issuer.url,
        BERTH_OPENAI_CODEX_BASE_URL: provider.baseUrl,
      }),
      TERM: "dumb",
    };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    procs.push(p);
    await p.until(/› /);
    assert.match(p.stdout, NOT_READY, "precondition: nothing is signed in");
    return p;
  }

  /** Types /login; returns the authorization URL the chat shows and the redirect the issuer answers it with. */
  async function login(p: Proc): Promise<{ mark: number; redirect: URL }> {
    const mark = p.stdout.length;
    p.write("/login\r");
    const url = new URL((await p.until(/Open this URL in your browser to sign in:\s+(https?:\/\/\S+)/, mark))[1]!);
    await p.until(/paste the final redirect URL \(or the code\)/, mark);
    assert.equal(`${url.origin}${url.pathname}`, `${issuer.url}/oauth/authorize`);
    const state = url.searchParams.get("state");
    assert.ok(state !== null && state.length > 0, "the authorization URL carries a state");
    const redirect = new URL(await issuer.authorize(url.href));
    assert.equal(redirect.searchParams.get("state"), state);
    assert.ok(redirect.searchParams.get("code")?.includes(MARKER), "the issuer's code carries the marker");
    return { mark, redirect };
  }

  /** A turn on the selected openai-codex model, answered by the fake provider with the stored credential. */
  async function codexTurn(p: Proc): Promise<void> {
    const before = provider.requests.length;
    const mark = p.stdout.length;
    p.write("hello codex\r");
    await p.until(/echo: hello codex[\s\S]*── completed/, mark);
    const req = provider.requests.slice(before).find((r) => r.api === "openai-responses");
    assert.ok(req, "the Codex Responses endpoint was called");
    assert.match(String(req.headers.authorization), new RegExp(`^Bearer access-${MARKER}-\\d+$`));
    assert.equal(req.headers["chatgpt-account-id"], issuer.behaviour.accountId);
  }

  /** Exits with /exit; checks the transcript: no stack trace, and no marker except in what the test pasted. */
  async function exitAndScan(p: Proc, pasted: string[]): Promise<void> {
    p.write("/exit\r");
    assert.equal(await p.exited, 0);
    const all = p.stdout + p.stderr;
    assert.doesNotMatch(all, /^\s+at .+:\d+:\d+\)?\s*$/m, "no stack trace");
    assert.doesNotMatch(all, /\b[A-Z]\w*Error\b/, "no raw error names");
    let rest = all;
    for (const s of pasted) rest = rest.split(s).join("<pasted>");
    assert.ok(!rest.includes(MARKER), `a secret marker reached the terminal:\n${rest}`);
  }

  it("a pasted redirect URL signs in, and the stored credential serves an openai-codex turn", async () => {
    const p = await startChat();
    const exchanges = issuer.tokenRequests;
    const { mark, redirect } = await login(p);
    p.write(`${redirect.href}\r`);
    // The result starts its own line (not appended to the prompt shown after the paste).
    await p.until(/\nSigned in to openai-codex\./, mark);
    assert.equal(issuer.tokenRequests, exchanges + 1);
    const shown = p.stdout.slice(mark);
    assert.match(shown, /checking the sign-in/);
    // Progress lines come in order and never after the result.
    assert.doesNotMatch(shown, /Signed in[\s\S]*(submitted|checking)/);
    await codexTurn(p);
    await exitAndScan(p, [redirect.href]);
  });

  it("a pasted bare code signs in (tied to the login's PKCE verifier)", async () => {
    const p = await startChat();
    const { mark, redirect } = await login(p);
    const code = redirect.searchParams.get("code")!;
    p.write(`${code}\r`);
    await p.until(/Signed in to openai-codex\./, mark);
    await codexTurn(p);
    await exitAndScan(p, [code]);
  });

  it("a redirect URL with the wrong state fails plainly; nothing is exchanged or stored", async () => {
    const p = await startChat();
    const exchanges = issuer.tokenRequests;
    const { mark, redirect } = await login(p);
    redirect.searchParams.set("state", "forged-state");
    p.write(`${redirect.href}\r`);
    const end = (await p.until(/\n(Sign-in (?:failed|ended)[^\r\n]*)/, mark))[1]!;
    assert.match(end, /^Sign-in failed \(callback failed\): .*Type \/login to try again\.$/);
    assert.equal(issuer.tokenRequests, exchanges, "no code exchange was attempted");
    assert.doesNotMatch(p.stdout.slice(mark), /Signed in|error:/);

    // Still not ready: a turn fails and the chat says how to fix it.
    const turnMark = p.stdout.length;
    p.write("hello codex\r");
    await p.until(/── [\s\S]*No model provider is ready/, turnMark);
    assert.doesNotMatch(p.stdout.slice(turnMark), /echo: hello codex/);

    // A new /login after the failure works.
    const again = await login(p);
    p.write(`${again.redirect.href}\r`);
    await p.until(/Signed in to openai-codex\./, again.mark);
    await exitAndScan(p, [redirect.href, again.redirect.href]);
  });
});
