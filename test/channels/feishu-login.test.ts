// Feishu sign-in by scan against a sign-in service that answers with something other than a sign-in answer: each
// case fails with a message naming what came back and where, instead of "cannot reach" (the old catch-all) or a
// body buffered without bound.
import { describe, it, afterEach } from "node:test";
import assert from "node:assert/strict";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { feishuScanLogin } from "../../src/channels/feishu/login.js";
import { InstantClock, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

async function scan(prepare: (fake: FakeFeishu) => void): Promise<{ fake: FakeFeishu; error: Error | null; shown: string[] }> {
  const fake = await new FakeFeishu().start();
  cleanups.push(() => fake.close());
  prepare(fake);
  const shown: string[] = [];
  try {
    await feishuScanLogin({ accounts: fake.base, larkAccounts: fake.base, open: fake.base, larkOpen: fake.base, show: (u) => shown.push(u), clock: new InstantClock() });
    return { fake, error: null, shown };
  } catch (err) {
    return { fake, error: err as Error, shown };
  }
}

describe("Feishu sign-in by scan: what the sign-in service answers", () => {
  it("a well-formed sign-in still succeeds (the bound is far above a real answer)", async () => {
    const { fake, error, shown } = await scan(() => undefined);
    assert.equal(error, null);
    assert.equal(shown.length, 1);
    assert.equal(fake.registrationAnswers.length, 0);
  });

  it("a gateway's HTML page names the service and its HTTP status, not the network", async () => {
    const { fake, error } = await scan((f) => f.registrationAnswers.push({ status: 502, body: "<html>Bad Gateway</html>", type: "text/html" }));
    assert.equal(error?.message, `the Feishu sign-in service at ${fake.base} answered HTTP 502, not a JSON object; try again later`);
  });

  it("a JSON answer that is not an object (null, an array) is refused the same way", async () => {
    for (const body of ["null", "[1,2]"]) {
      const { fake, error } = await scan((f) => f.registrationAnswers.push({ status: 200, body }));
      assert.equal(error?.message, `the Feishu sign-in service at ${fake.base} answered HTTP 200, not a JSON object; try again later`, body);
    }
  });

  it("a body that never ends is cut at 64 KiB and named, not buffered until the 30 s deadline", async () => {
    const { fake, error } = await scan((f) => f.registrationAnswers.push("endless"));
    assert.equal(error?.message, `the Feishu sign-in service at ${fake.base} sent an answer over 64 KiB, not a sign-in answer; try again later`);
    assert.ok(fake.endlessBytes < 16 * 1024 * 1024, `the server wrote ${fake.endlessBytes} bytes`);
  });

  it("a poll that goes bad after the QR code was shown fails the same way", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    const shown: string[] = [];
    const show = (u: string): void => {
      shown.push(u);
      fake.registrationAnswers.push({ status: 503, body: "busy", type: "text/plain" }); // the first poll's answer
    };
    await assert.rejects(
      feishuScanLogin({ accounts: fake.base, larkAccounts: fake.base, open: fake.base, larkOpen: fake.base, show, clock: new InstantClock() }),
      { message: `the Feishu sign-in service at ${fake.base} answered HTTP 503, not a JSON object; try again later` },
    );
    assert.equal(shown.length, 1);
  });

  it("a service nobody listens on names the address and the network", async () => {
    const fake = await new FakeFeishu().start();
    const base = fake.base;
    await fake.close();
    await assert.rejects(
      feishuScanLogin({ accounts: base, larkAccounts: base, open: base, larkOpen: base, show: () => undefined, clock: new InstantClock() }),
      { message: `cannot reach the Feishu sign-in service at ${base}; check the network and try again` },
    );
  });
});
