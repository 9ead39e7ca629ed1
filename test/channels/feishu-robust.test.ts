/**
 * Feishu/Lark bridge against a platform that misbehaves: chats whose history is refused for good during catch-up,
 * a tenant-token endpoint that rate-limits or fails, a server that drops every link as soon as it opens.
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import type { AccountSettings } from "../../src/channels/common/component.js";
import { BUSY_REPLY } from "../../src/channels/common/bridge.js";
import { FeishuComponent, STABLE_LINK_MS } from "../../src/channels/feishu/component.js";
import type { FeishuCredentials } from "../../src/channels/feishu/credentials.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { InstantClock, tempHome, until, runCleanups } from "./helpers.js";

const OWNER = "ou_owner000000001";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function setup(fake: FakeFeishu, settings: Partial<AccountSettings> = {}) {
  const { home, cleanup } = await tempHome();
  cleanups.push(cleanup);
  const credentials: FeishuCredentials = { brand: "feishu", app_id: fake.appId, app_secret: fake.appSecret, owner_open_id: OWNER, open_url: fake.base, saved_unix_seconds: 0 };
  const driver = new FakeSessionDriver();
  const clock = new InstantClock();
  const logs: string[] = [];
  const comp = new FeishuComponent({
    home,
    account: "default",
    credentials,
    settings: { enabled: true, workspace: home, remoteTools: "none", senders: "anyone", ...settings },
    driver,
    clock,
    log: (l) => logs.push(l),
  });
  await comp.start();
  cleanups.push(() => comp.stop());
  return { comp, driver, clock, logs };
}

async function startFake(): Promise<FakeFeishu> {
  const fake = await new FakeFeishu().start();
  cleanups.push(() => fake.close());
  return fake;
}

const textOf = (s: { content: Record<string, unknown> }): string => String(s.content["text"]);

describe("feishu: catch-up against refused chats", () => {
  it("a chat the bot was removed from is skipped on reconnect; the account connects and answers others", async () => {
    const fake = await startFake();
    const { comp, logs } = await setup(fake);
    await comp.health.until((h) => h.state === "connected");
    fake.userMessage({ chatId: "oc_gone", chatType: "group", sender: "ou_g", text: "hello", mentionBot: true });
    await fake.waitFor(() => fake.sent.length >= 1);
    await comp.bridge!.idle();
    fake.removedFrom.add("oc_gone"); // its history now answers 230002 for good
    fake.kick();
    // Before the fix every connect failed in catch-up and was retried: connections kept climbing.
    await until(() => (comp.health.state === "connected" && fake.connections >= 2) || fake.connections >= 5);
    assert.equal(comp.health.state, "connected");
    assert.equal(fake.connections, 2, "one reconnect, not a retry loop");
    assert.ok(logs.some((l) => /catch-up: a chat was skipped \(code 230002\)/.test(l)));
    assert.ok(!logs.some((l) => l.includes("oc_gone")), "the log names no chat");
    fake.userMessage({ chatId: "oc_dm", chatType: "p2p", sender: "ou_d", text: "still there?" });
    await fake.waitFor(() => fake.sent.length >= 2);
    assert.equal(textOf(fake.sent[1]!), "echo: still there?");
  });
});

describe("feishu: a reconnect storm", () => {
  it("a server that drops every link at once is reconnected with growing pauses, not once a second forever", async () => {
    const fake = await startFake();
    const { comp, clock } = await setup(fake);
    await comp.health.until((h) => h.state === "connected");
    fake.dropAfterPing = true; // from now on every link closes as soon as it opened
    fake.kick();
    await fake.waitFor(() => fake.connections >= 6);
    // Before the fix each link that opened reset the backoff: 1 s, 1 s, 1 s … with a catch-up of every chat each time.
    assert.deepEqual(clock.sleeps.slice(0, 4), [1000, 2000, 4000, 8000]);
    fake.dropAfterPing = false;
    await comp.health.until((h) => h.state === "connected");
    const before = fake.connections;
    clock.offsetMs += STABLE_LINK_MS; // this link stayed up a minute: the next drop starts again at 1 s
    fake.kick();
    await fake.waitFor(() => fake.connections > before);
    assert.equal(clock.sleeps.at(-1), 1000);
  });
});

describe("feishu: an endpoint that answers garbage", () => {
  /** Every error status showed until the account connected. */
  const errorsUntilConnected = async (comp: FeishuComponent): Promise<string[]> => {
    const errors: string[] = [];
    await comp.health.until((h) => {
      if (h.error !== null && errors.at(-1) !== h.error) errors.push(h.error);
      return h.state === "connected" || h.state === "failed";
    });
    assert.equal(comp.health.state, "connected");
    return errors;
  };

  it("a proxy's HTML error page and a JSON null are named as such, backed off, and the account connects", async () => {
    const fake = await startFake();
    fake.endpointAnswers.push({ status: 502, body: "<html><body>502 Bad Gateway</body></html>", type: "text/html" }, { status: 200, body: "null" });
    const { comp, logs } = await setup(fake);
    assert.deepEqual(await errorsUntilConnected(comp), [
      "long-connection endpoint: HTTP 502, the answer is not a JSON object",
      "long-connection endpoint: HTTP 200, the answer is not a JSON object",
    ]);
    assert.ok(!logs.some((l) => l.includes(fake.appSecret)));
  });

  it("bot info answered by a gateway's HTML 503 names the status, not a missing bot capability", async () => {
    const fake = await startFake();
    fake.botInfoAnswers.push({ status: 503, body: "<html><body>503 Service Unavailable</body></html>", type: "text/html" }, { status: 200, body: '{"code":10003,"msg":"bot disabled"}' });
    const { comp } = await setup(fake);
    assert.deepEqual(await errorsUntilConnected(comp), ["bot info: HTTP 503, the answer is not a JSON object", "bot info refused (code 10003): is the bot capability enabled?"]);
  });

  it("an answer that never ends is cut at 1 MiB, named, and retried", async () => {
    const fake = await startFake();
    fake.endpointAnswers.push("endless");
    const { comp } = await setup(fake);
    assert.deepEqual(await errorsUntilConnected(comp), ["long-connection endpoint: HTTP 200, response over 1 MiB"]);
    assert.ok(fake.endlessBytes < 32 * 1024 * 1024, `the server wrote ${fake.endlessBytes} bytes`);
  });
});

describe("feishu: a flood of 100 messages at once", () => {
  it("every event is acked; 64 are claimed, the other 36 told they were not processed; none runs twice", async () => {
    const fake = await startFake();
    const { comp, driver } = await setup(fake);
    await comp.health.until((h) => h.state === "connected");
    driver.respond = () => new Promise(() => undefined); // turns never end: the claims stay taken
    const ids = Array.from({ length: 100 }, (_, i) => fake.userMessage({ chatId: `oc_f${i}`, chatType: "p2p", sender: `ou_f${i}`, text: `m${i}` }));
    await fake.waitFor(() => fake.acks.length >= 100 && fake.sent.length >= 36);
    assert.ok(fake.acks.every((a) => a.code === 200));
    assert.equal(new Set(fake.acks.map((a) => a.messageId)).size, 100, "each event acked once, none re-pushed");
    const busy = fake.sent.filter((s) => textOf(s) === BUSY_REPLY);
    assert.equal(busy.length, 36);
    assert.equal(new Set(busy.map((s) => s.target)).size, 36, "one notice per refused message, each to its message");
    const claimed = ids.filter((id) => !busy.some((s) => s.target === id));
    assert.equal(claimed.length, 64);
    await until(() => driver.turns.length >= 4);
    assert.equal(driver.turns.length, 4, "at most 4 turns at once");
  });
});

describe("feishu: tenant token failures", () => {
  it("a rate-limited (429) or failing (500) tenant-token request backs off and connects; it is no rejected login", async () => {
    const fake = await startFake();
    fake.tokenFailures.push({ status: 429, code: 99991400 }, { status: 500, code: 1 });
    const { comp, clock } = await setup(fake);
    await comp.health.until((h) => h.state === "connected" || h.state === "failed");
    assert.equal(comp.health.state, "connected", comp.status().error ?? "");
    assert.deepEqual(clock.sleeps.slice(0, 2), [1000, 2000]);
    assert.equal(comp.status().error, null);
  });

  it("while the token endpoint fails, status shows a retry with the code and never the secret", async () => {
    const fake = await startFake();
    fake.tokenFailures.push({ status: 429, code: 99991400 });
    const { comp } = await setup(fake);
    await comp.health.until((h) => h.state === "backoff" || h.state === "connected" || h.state === "failed");
    assert.equal(comp.health.state, "backoff");
    assert.match(comp.status().error ?? "", /tenant token: code 99991400/);
    assert.ok(!JSON.stringify(comp.status()).includes(fake.appSecret));
    await comp.health.until((h) => h.state === "connected" || h.state === "failed");
    assert.equal(comp.health.state, "connected");
  });
});
