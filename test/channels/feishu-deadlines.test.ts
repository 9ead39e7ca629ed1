/**
 * Feishu REST calls and the Feishu logins against a server that takes the request and never answers: every deadline
 * runs on injected timers, so the named timeout error is observed without waiting real time (at the deadline, not a
 * millisecond before).
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { CALL_TIMEOUT_MS, FeishuApi, SMALL_TIMEOUT_MS } from "../../src/channels/feishu/api.js";
import { feishuAppLogin, feishuScanLogin, REGISTRATION_TIMEOUT_MS } from "../../src/channels/feishu/login.js";
import { LoginError } from "../../src/channels/wechat/login.js";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { InstantClock, ManualTimers, startFeishu, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function fakeFeishu(): Promise<FakeFeishu> {
  const f = await new FakeFeishu().start();
  cleanups.push(() => f.close());
  return f;
}

/** Settles `p` into a box the test can look at without awaiting it. */
function watch(p: Promise<unknown>): { err: unknown; done: boolean } {
  const out = { err: null as unknown, done: false };
  p.then(
    () => (out.done = true),
    (e: unknown) => {
      out.err = e;
      out.done = true;
    },
  );
  return out;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("a Feishu REST request that is never answered", () => {
  it(`the tenant token request fails at ${SMALL_TIMEOUT_MS / 1000} s, naming the wait`, async () => {
    const fake = await fakeFeishu();
    const timers = new ManualTimers();
    const api = new FeishuApi({ open: fake.base, appId: fake.appId, appSecret: fake.appSecret, clock: new InstantClock(), timers });
    fake.hold.add("/open-apis/auth/v3/tenant_access_token/internal");
    const p = api.tenantToken();
    const out = watch(p);
    await fake.waitFor(() => fake.heldRequests === 1);
    timers.advance(SMALL_TIMEOUT_MS - 1);
    await tick();
    assert.equal(out.done, false, "still waiting a millisecond before the deadline");
    timers.advance(1);
    await assert.rejects(p, { name: "FeishuError", message: `tenant token: no answer within ${SMALL_TIMEOUT_MS / 1000} s` });
  });

  it(`a reply gives up after 3 attempts of ${CALL_TIMEOUT_MS / 1000} s, named in the log`, async () => {
    const timers = new ManualTimers();
    const logs: string[] = [];
    const { fake, driver } = await startFeishu(cleanups, { timers, log: (l) => logs.push(l) });
    fake.hold.add("/open-apis/im/v1/messages/");
    const id = fake.userMessage({ chatId: "oc_chat0001", chatType: "p2p", sender: "ou_user0001", text: "hello" });
    await driver.waitTurns(1);
    for (let attempt = 1; attempt <= 3; attempt++) {
      await fake.waitFor(() => fake.heldRequests === attempt);
      timers.advance(CALL_TIMEOUT_MS - 1);
      await tick();
      assert.equal(fake.heldRequests, attempt, "no new attempt before the deadline");
      assert.ok(!logs.some((l) => l.startsWith("reply not sent")));
      timers.advance(1);
    }
    await until(() => logs.some((l) => l.startsWith("reply not sent")));
    assert.deepEqual(
      logs.filter((l) => l.startsWith("reply not sent")),
      [`reply not sent: /open-apis/im/v1/messages/${id}/reply: no answer within ${CALL_TIMEOUT_MS / 1000} s (3 attempts)`],
    );
  });
});

describe("the Feishu logins against a server that never answers", () => {
  it(`the sign-in by scan ends at ${REGISTRATION_TIMEOUT_MS / 1000} s naming the service and the wait`, async () => {
    const fake = await fakeFeishu();
    const timers = new ManualTimers();
    fake.hold.add("/oauth/v1/app/registration");
    const p = feishuScanLogin({ accounts: fake.base, larkAccounts: fake.base, open: fake.base, larkOpen: fake.base, show: () => undefined, clock: new InstantClock(), timers });
    const out = watch(p);
    await fake.waitFor(() => fake.heldRequests === 1);
    timers.advance(REGISTRATION_TIMEOUT_MS - 1);
    await tick();
    assert.equal(out.done, false);
    timers.advance(1);
    await assert.rejects(p, new LoginError(`the Feishu sign-in service at ${fake.base} did not answer within ${REGISTRATION_TIMEOUT_MS / 1000} s; check the network and try again`));
  });

  it("the App ID login ends at the token deadline with a message saying so", async () => {
    const fake = await fakeFeishu();
    const timers = new ManualTimers();
    fake.hold.add("/open-apis/auth/v3/tenant_access_token/internal");
    const p = feishuAppLogin({ brand: "feishu", open: fake.base, appId: fake.appId, appSecret: fake.appSecret, owner: "", timers });
    const out = watch(p);
    await fake.waitFor(() => fake.heldRequests === 1);
    timers.advance(SMALL_TIMEOUT_MS - 1);
    await tick();
    assert.equal(out.done, false);
    timers.advance(1);
    await assert.rejects(
      p,
      new LoginError(`the Feishu open platform did not answer (tenant token: no answer within ${SMALL_TIMEOUT_MS / 1000} s); check the network and try again`),
    );
    assert.ok(!String((out.err as Error).message).includes(fake.appSecret));
  });
});
