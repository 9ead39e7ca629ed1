/**
 * iLink calls and the WeChat QR login against a server that takes the request and never answers: every deadline runs
 * on injected timers, so the named timeout error is observed without waiting real time.
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { LoginError, MAX_SILENT_STATUS_CHECKS, wechatLogin } from "../../src/channels/wechat/login.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { InstantClock, ManualTimers, startWechat, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function fakeIlink(): Promise<FakeIlink> {
  const f = await new FakeIlink().start();
  cleanups.push(() => f.close());
  return f;
}

describe("an iLink call that never answers", () => {
  it("sendmessage gives up after 3 attempts of 30 s each, named in the log, and the reply is held", async () => {
    const timers = new ManualTimers();
    const logs: string[] = [];
    const { fake } = await startWechat(cleanups, { timers, log: (l) => logs.push(l) });
    fake.stallSendsAfter = 0;
    cleanups.push(() => Promise.resolve(fake.dropHeld()));
    fake.push(fake.text("a@im.wechat", "hello"));
    for (let attempt = 1; attempt <= 3; attempt++) {
      await fake.waitFor(() => fake.stalledSends >= attempt);
      assert.ok(!logs.some((l) => l.startsWith("reply not sent")), `attempt ${attempt} still waits`);
      timers.advance(29_999);
      assert.equal(fake.stalledSends, attempt, "no new attempt before the deadline");
      timers.advance(1);
    }
    await until(() => logs.some((l) => l.startsWith("reply not sent")));
    assert.deepEqual(logs.filter((l) => l.startsWith("reply not sent")), ["reply not sent: /ilink/bot/sendmessage: no answer within 30 s (3 attempts)"]);
    assert.ok(!logs.join("\n").includes(fake.token));
    // The server answers again: the held reply comes in front of the next one, once.
    fake.stallSendsAfter = null;
    fake.push(fake.text("a@im.wechat", "again"));
    await fake.waitSent((s) => s.some((m) => m.text?.includes("echo: again") ?? false));
    const text = fake.delivered().map((m) => m.text ?? "").join("\n");
    assert.equal(text.split("echo: hello").length - 1, 1, text);
  });
});

describe("a CDN download that never answers", () => {
  // The runner's timeout only guards against the real 120 s deadline this replaced; nothing asserts on wall time.
  it("fails at 120 s on the injected timers, not before; the turn runs with a note", { timeout: 30_000 }, async () => {
    const timers = new ManualTimers();
    const { fake, driver } = await startWechat(cleanups, { timers });
    fake.stallDownloads = true;
    cleanups.push(() => Promise.resolve(fake.dropHeld()));
    const media = fake.putMedia(Buffer.from("png bytes"));
    const image = { type: 2, image_item: { media: { encrypt_query_param: media.encrypt_query_param, aes_key: media.aes_key } } };
    fake.push(fake.text("a@im.wechat", "look", { item_list: [{ type: 1, text_item: { text: "look" } }, image] }));
    await fake.waitFor(() => fake.stalledDownloads === 1);
    timers.advance(119_999);
    await new Promise((r) => setImmediate(r));
    assert.equal(driver.turns.length, 0, "still downloading at 119.999 s");
    timers.advance(1);
    const [t] = await driver.waitTurns(1);
    assert.equal(t!.prompt, "look\n[image: download failed]");
  });
});

describe("the WeChat QR login against a server that never answers", () => {
  it("a QR code request unanswered for 30 s ends the login naming the wait", async () => {
    const fake = await fakeIlink();
    fake.holdLogin = "qrcode";
    const timers = new ManualTimers();
    const login = wechatLogin({ api: fake.base, cdn: fake.cdnBase, show: () => undefined, clock: new InstantClock(), timers });
    const out: { err: unknown } = { err: null };
    login.catch((e: unknown) => (out.err = e));
    await fake.waitFor(() => fake.heldLogins === 1);
    timers.advance(29_999);
    await new Promise((r) => setImmediate(r));
    assert.equal(out.err, null, "still waiting at 29.999 s");
    timers.advance(1);
    await assert.rejects(login, new LoginError("the WeChat login server did not answer within 30 s; check the network and try again"));
  });

  it(`status checks unanswered ${MAX_SILENT_STATUS_CHECKS} times in a row end the login; one fewer keeps it waiting`, async () => {
    const fake = await fakeIlink();
    const timers = new ManualTimers();
    const shown: string[] = [];
    fake.holdLogin = null;
    const login = wechatLogin({ api: fake.base, cdn: fake.cdnBase, show: (u) => shown.push(u), clock: new InstantClock(), timers, pollTimeoutMs: 35_000 });
    const out: { err: unknown } = { err: null };
    login.catch((e: unknown) => (out.err = e));
    await until(() => shown.length === 1);
    fake.holdLogin = "status";
    for (let n = 1; n < MAX_SILENT_STATUS_CHECKS; n++) {
      await fake.waitFor(() => fake.heldLogins === n);
      timers.advance(35_000);
    }
    await fake.waitFor(() => fake.heldLogins === MAX_SILENT_STATUS_CHECKS);
    assert.equal(out.err, null, `${MAX_SILENT_STATUS_CHECKS - 1} silent checks: still waiting for the scan`);
    timers.advance(35_000);
    await assert.rejects(
      login,
      new LoginError(`the WeChat login server did not answer ${MAX_SILENT_STATUS_CHECKS} status checks in a row (35 s each); check the network and run the login again`),
    );
  });

  it(`status checks answered with HTTP 5xx ${MAX_SILENT_STATUS_CHECKS} times in a row end the login; one fewer keeps it waiting`, async () => {
    const fake = await fakeIlink();
    const clock = new InstantClock();
    const shown: string[] = [];
    const login = wechatLogin({ api: fake.base, cdn: fake.cdnBase, show: (u) => shown.push(u), clock, timers: new ManualTimers() });
    const out: { err: unknown } = { err: null };
    login.catch((e: unknown) => (out.err = e));
    await until(() => shown.length === 1);
    // One fewer than the bound, then a real answer: the count starts again (a passing gateway error is a "wait").
    fake.statusHttp = 524;
    await fake.waitFor(() => fake.failedStatusChecks === MAX_SILENT_STATUS_CHECKS - 1);
    fake.statusHttp = null;
    const answered = fake.statusChecks + 1;
    await fake.waitFor(() => fake.statusChecks === answered);
    fake.statusHttp = 503;
    await fake.waitFor(() => fake.failedStatusChecks === 2 * MAX_SILENT_STATUS_CHECKS - 1);
    await assert.rejects(
      login,
      new LoginError(`the WeChat login server answered ${MAX_SILENT_STATUS_CHECKS} status checks in a row with a server error (the last: HTTP 503); try again later`),
    );
    assert.equal(fake.failedStatusChecks, 2 * MAX_SILENT_STATUS_CHECKS - 1, "no check after the one that ended it");
    assert.equal(shown.length, 1);
  });
});
