/**
 * A WeChat server that misbehaves, or people who flood the bot: a CDN that takes an upload and never answers, a
 * `getupdates` that answers "nothing new" at once, a chat that keeps writing while its turns run, and a burst of
 * messages the bridge ignores pushing handled message IDs out of the duplicate check. Asserted on what the fake
 * server receives and what the session host is asked to do.
 */
import assert from "node:assert/strict";
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { BUSY_REPLY, FAILURE_REPLY } from "../../src/channels/common/bridge.js";
import { channelPaths } from "../../src/channels/common/files.js";
import { SEEN_LIMIT } from "../../src/channels/common/state.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import type { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { FrozenClock, ManualTimers, startWechat, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

const exists = (p: string): Promise<boolean> => stat(p).then(() => true, () => false);

/** The owner's "send the file" turn attaches a file (written to `path`); every other prompt is echoed. */
function attachOnRequest(driver: FakeSessionDriver, path: string): void {
  driver.respond = async (t) => {
    if (t.prompt !== "send the file") return { text: `echo: ${t.prompt}` };
    await writeFile(path, "file body");
    return { text: "here it is", files: [{ path, name: "result.txt", size: 9, caption: null }] };
  };
}

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

describe("a CDN that takes an upload and never answers", () => {
  it("gives the upload up at its deadline with a clear log line; other chats are answered meanwhile", async () => {
    const logs: string[] = [];
    const { fake, driver, clock, home } = await startWechat(cleanups, { settings: { remoteTools: "owner" }, log: (l) => logs.push(l) });
    const outbox = join(home, "attached.txt");
    attachOnRequest(driver, outbox);
    fake.stallUploads = true;
    cleanups.push(() => {
      fake.stallUploads = false; // whatever happened, the CDN lets go before the account stops
      fake.dropHeld();
      return Promise.resolve();
    });
    fake.push(fake.text(fake.ownerId, "send the file"));
    await fake.waitFor(() => fake.stalledUploads === 1);
    assert.ok(clock.sleeps.includes(120_000), "the upload runs against a 120 s deadline");
    fake.push(fake.text("other@im.wechat", "hello"));
    await fake.waitSent((s) => s.some((m) => m.text === "echo: hello"));
    clock.fireLong(); // the deadline passes
    await fake.waitSent((s) => s.some((m) => m.text?.includes("[1 attached file could not be sent]") ?? false));
    assert.equal(fake.stalledUploads, 1, "an upload past its deadline is not tried again");
    assert.equal(fake.sent.length, 3, "the reply, the other chat's answer and the note: no file item");
    assert.ok(logs.some((l) => l.includes("cdn upload: no answer within 120 s")), logs.join("\n"));
    assert.ok(!logs.some((l) => l.includes(fake.token) || l.includes("encrypted_query_param")));
    await until(async () => !(await exists(outbox)));
  });

  it("stopping the account does not wait for a stalled upload; the next start sends the file once", async () => {
    const { fake, driver, comp, home } = await startWechat(cleanups, { settings: { remoteTools: "owner" } });
    const outbox = join(home, "attached.txt");
    attachOnRequest(driver, outbox);
    fake.stallUploads = true;
    fake.push(fake.text(fake.ownerId, "send the file"));
    await fake.waitFor(() => fake.stalledUploads === 1);
    await comp.stop();
    const state = JSON.parse(await readFile(channelPaths(home, "wechat", "default").state, "utf8")) as { in_flight: unknown[] };
    assert.equal(state.in_flight.length, 1, "the unfinished reply is kept for the next start");
    assert.ok(await exists(outbox), "the file waits in the outbox");
    fake.stallUploads = false;
    const again = await startWechat(cleanups, { home, fake, driver, settings: { remoteTools: "owner" } });
    await fake.waitSent((s) => s.some((m) => m.item["type"] === 4));
    await until(async () => !(await exists(outbox))); // sent, so the outbox copy goes
    await again.comp.health.until((h) => h.state === "connected"); // recovery is over: polling began
    assert.deepEqual(fake.delivered().map((s) => s.item["type"]), [1, 4], "the text once, then the file once");
  });
});

describe("a getupdates that answers at once", () => {
  async function polling(tookMs: number): Promise<{ fake: FakeIlink; clock: FrozenClock }> {
    const fake = await new FakeIlink({ holdMs: 0 }).start();
    cleanups.push(() => fake.close());
    const clock = new FrozenClock();
    fake.onPoll = () => (clock.offsetMs += tookMs); // the server held each poll this long
    const { comp } = await startWechat(cleanups, { fake, clock });
    await fake.waitPolls(6);
    await comp.stop();
    return { fake, clock };
  }

  it("a poll answered in 999 ms is followed by a 1 ms pause, so polls start at most once a second", async () => {
    const { fake, clock } = await polling(999);
    assert.ok(clock.sleeps.length >= fake.polls.length - 1, `${clock.sleeps.length} pauses for ${fake.polls.length} polls`);
    assert.ok(clock.sleeps.every((ms) => ms === 1), String(clock.sleeps));
  });

  it("a poll the server held for 1 s is followed by the next one at once", async () => {
    const { fake, clock } = await polling(1000);
    assert.ok(fake.polls.length >= 6);
    assert.deepEqual(clock.sleeps, []);
  });
});

describe("a getupdates body that never ends", () => {
  it("is cut at its 16 MiB bound: the account backs off naming it, reads no further, then recovers", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.pollFailures.push("endless");
    const { comp, clock } = await startWechat(cleanups, { fake });
    // Before the bound, the body was buffered until the poll's 40 s deadline and then taken for an empty poll.
    await comp.health.until((h) => h.state === "backoff" || h.state === "connected");
    assert.equal(comp.health.state, "backoff");
    assert.equal(comp.status().error, "getupdates: response over 16 MiB");
    assert.ok(fake.endlessBytes < 32 * 1024 * 1024, `the server wrote ${fake.endlessBytes} bytes`);
    await comp.health.until((h) => h.state === "connected");
    assert.deepEqual(clock.sleeps.slice(0, 1), [1000]);
    assert.equal(comp.status().error, null);
  });
});

describe("a getupdates answer that starts and then stalls", () => {
  it("fails at the poll's deadline as a broken answer (backoff), not as an empty poll that keeps the account connected", async () => {
    const fake = await new FakeIlink({ longPollingTimeoutMs: 1, holdMs: 100 }).start(); // the poll's deadline: 1 ms + 5 s of grace
    cleanups.push(() => fake.close());
    const timers = new ManualTimers();
    const { comp } = await startWechat(cleanups, { fake, timers });
    await comp.health.until((h) => h.state === "connected");
    let armedAtStall = -1; // timers set when the stalled poll arrived: its deadline, and nothing after it yet
    let stallPoll = -1;
    fake.onPoll = () => {
      if (armedAtStall >= 0 || fake.pollFailures[0] !== "stall") return;
      armedAtStall = timers.setCount;
      stallPoll = fake.polls.length;
    };
    fake.pollFailures.push("stall");
    await until(() => armedAtStall >= 0 && timers.setCount > armedAtStall); // the answer began: its body is timed
    assert.equal(comp.health.state, "connected", "nothing fails before the deadline");
    timers.advance(5_000);
    assert.equal(comp.health.state, "connected", "nor 1 ms before it");
    timers.advance(1); // the deadline passes with the body unfinished
    await comp.health.until((h) => h.state === "backoff" || fake.polls.length > stallPoll);
    assert.equal(comp.health.state, "backoff");
    assert.equal(comp.status().error, "getupdates: the answer did not finish within 5 s");
    await comp.health.until((h) => h.state === "connected");
  });

  it("a poll not answered by its deadline is an empty poll: no error, polling goes on", async () => {
    const fake = await new FakeIlink({ longPollingTimeoutMs: 1, holdMs: 3_600_000 }).start(); // polls wait for a message
    cleanups.push(() => fake.close());
    const timers = new ManualTimers();
    fake.push(fake.text("a@im.wechat", "hi")); // the first poll is answered at once, so the account connects
    const { comp } = await startWechat(cleanups, { fake, timers });
    await comp.health.until((h) => h.state === "connected");
    await fake.waitPolls(2); // the second poll is held: only its deadline can end it
    timers.advance(5_001);
    await fake.waitPolls(3);
    assert.equal(comp.health.state, "connected");
    assert.equal(comp.status().error, null);
    assert.equal(comp.health.restarts, 0, "no backoff");
  });
});

describe("the session expires (-14) in the middle of a conversation", () => {
  it("the reply is held, the account asks for a new login, and the next login's first reply carries it", async () => {
    const logs: string[] = [];
    const { fake, driver, comp, home } = await startWechat(cleanups, { log: (l) => logs.push(l) });
    let answer!: (text: string) => void;
    driver.respond = () => new Promise((r) => (answer = (text) => r({ text })));
    fake.push(fake.text("a@im.wechat", "question"));
    await driver.waitTurns(1);
    fake.tokenExpired = true; // WeChat ends the session while the turn runs
    answer("the answer");
    await comp.health.until((h) => h.state === "failed");
    await comp.bridge!.idle();
    assert.match(comp.status().error ?? "", /berth channel login wechat/);
    assert.equal(fake.delivered().length, 0);
    assert.ok(logs.some((l) => l.includes("session timeout (-14)")), logs.join("\n"));
    assert.ok(!logs.some((l) => l.includes(fake.token) || l.includes("the answer") || l.includes("question")), logs.join("\n"));
    await comp.stop();
    fake.tokenExpired = false; // logged in again
    driver.respond = (t) => Promise.resolve({ text: `echo: ${t.prompt}` });
    await startWechat(cleanups, { home, fake, driver });
    fake.push(fake.text("a@im.wechat", "again"));
    await fake.waitSent((s) => s.length >= 1);
    assert.equal(fake.sent[0]!.text, "[earlier reply]\nthe answer\n\n[reply to your latest message]\necho: again");
  });
});

describe("busy notices", () => {
  const busyTo = (fake: FakeIlink, who: string): number => fake.sent.filter((s) => s.to === who && (s.text?.includes(BUSY_REPLY) ?? false)).length;
  /** Messages of `who` with every turn held open: the first 8 are claimed, the rest get (or not) a busy notice. */
  const flood = (fake: FakeIlink, who: string, n: number, from = 1): void => {
    for (let i = from; i < from + n; i++) fake.push(fake.text(who, `m${i}`));
  };

  it("a chat gets one busy notice per minute however many messages it sends: none at 59.999 s, one at 60 s", async () => {
    const clock = new FrozenClock();
    const { fake, driver } = await startWechat(cleanups, { clock });
    driver.respond = () => new Promise(() => undefined); // turns never end: the claims stay taken
    flood(fake, "a@im.wechat", 9);
    await fake.waitFor(() => busyTo(fake, "a@im.wechat") === 1);
    flood(fake, "a@im.wechat", 1, 10);
    flood(fake, "c@im.wechat", 9); // its notice is sent after any for a's 10th message
    await fake.waitFor(() => busyTo(fake, "c@im.wechat") === 1);
    assert.equal(busyTo(fake, "a@im.wechat"), 1, "a second message in the minute gets no notice");
    clock.offsetMs = 59_999;
    flood(fake, "a@im.wechat", 1, 11);
    flood(fake, "d@im.wechat", 9);
    await fake.waitFor(() => busyTo(fake, "d@im.wechat") === 1);
    assert.equal(busyTo(fake, "a@im.wechat"), 1, "none 1 ms before the minute is up");
    clock.offsetMs = 60_000;
    flood(fake, "a@im.wechat", 1, 12);
    await fake.waitFor(() => busyTo(fake, "a@im.wechat") === 2);
  });

  it("at most 64 chats get a busy notice per minute; the 65th gets none", async () => {
    const clock = new FrozenClock();
    const { fake, driver } = await startWechat(cleanups, { clock });
    driver.respond = () => new Promise(() => undefined);
    for (let c = 0; c < 8; c++) flood(fake, `full${c}@im.wechat`, 8); // 64 claims: the account is full
    await until(() => fake.polls.some((p) => p.cursor === "c64"));
    assert.equal(fake.sent.length, 0);
    for (let i = 1; i <= 65; i++) fake.push(fake.text(`s${i}@im.wechat`, "hi"));
    await fake.waitFor(() => busyTo(fake, "s64@im.wechat") === 1);
    clock.offsetMs = 60_000;
    fake.push(fake.text("s66@im.wechat", "hi")); // a new minute: notices go out again, after any earlier one
    await fake.waitFor(() => busyTo(fake, "s66@im.wechat") === 1);
    assert.equal(busyTo(fake, "s65@im.wechat"), 0);
    assert.equal(fake.sent.length, 65);
  });
});

describe("duplicate suppression", () => {
  it(`${SEEN_LIMIT} ignored messages (bot echoes, group chatter) do not make a handled message run again`, async () => {
    const { fake, driver, comp } = await startWechat(cleanups);
    const real = fake.text("a@im.wechat", "once");
    fake.push(real);
    await fake.waitSent((s) => s.length >= 1);
    await comp.bridge!.idle(); // handled: its ID is now among the seen ones
    for (let i = 0; i < SEEN_LIMIT; i++) {
      fake.push(i % 2 === 0 ? { ...fake.text("a@im.wechat", `bot echo ${i}`), message_type: 2 } : fake.text("b@im.wechat", `chatter ${i}`, { group_id: "g1@chatroom" }));
    }
    await until(() => fake.polls.some((p) => p.cursor === `c${1 + SEEN_LIMIT}`));
    fake.push({ ...real }); // WeChat replays the handled message
    fake.push(fake.text("a@im.wechat", "after"));
    await fake.waitSent((s) => s.some((m) => m.text === "echo: after"));
    await comp.bridge!.idle();
    assert.deepEqual(driver.turns.map((t) => t.prompt), ["once", "after"]);
    assert.equal(fake.sent.length, 2);
  });
});
