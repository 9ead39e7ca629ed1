/**
 * A WeChat server that misbehaves, or people who flood the bot: a CDN that takes an upload and never answers, a
 * `getupdates` that answers "nothing new" at once, a chat that keeps writing while its turns run, and a burst of
 * messages the bridge ignores pushing handled message IDs out of the duplicate check. Asserted on what the fake
 * server receives and what the session host is asked to do.
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import { FAILURE_REPLY } from "../../src/channels/common/bridge.js";
import { startWechat, until } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("stopping an account while a chat waits", () => {
  it("starts none of the chat's queued turns; the next start tells each unanswered message so", async () => {
    const { fake, driver, comp, home } = await startWechat(cleanups);
    driver.respond = () => new Promise(() => undefined); // the first turn runs until the account stops
    fake.push(fake.text("a@im.wechat", "m1"));
    fake.push(fake.text("a@im.wechat", "m2")); // queued behind m1
    await driver.waitTurns(1);
    await until(() => fake.polls.some((p) => p.cursor === "c2")); // both claimed
    await comp.stop();
    assert.deepEqual(driver.turns.map((t) => t.prompt), ["m1"]);
    driver.respond = (t) => Promise.resolve({ text: `echo: ${t.prompt}` });
    await startWechat(cleanups, { home, fake, driver });
    await fake.waitSent((s) => s.length >= 2);
    assert.ok(fake.sent.every((s) => s.text?.includes(FAILURE_REPLY) ?? false));
    assert.equal(driver.turns.length, 1);
  });
});
