/**
 * Channel files (settings, credentials, delivery state) that are corrupt or hostile: read through the stores' bounded
 * reader, so invalid UTF-8, a byte order mark, 100k-deep nesting, a file over the bound or a FIFO each end in a
 * fixed "<path> cannot be read: …; move it away" (or are accepted, a BOM), and never hang or stop an account for good.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir, open, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { afterEach, describe, it } from "node:test";
import { channelPaths, MAX_CHANNEL_FILE_BYTES } from "../../src/channels/common/files.js";
import { configPath, loadChannelsConfig, setAccount } from "../../src/channels/config.js";
import { ChannelSupervisor } from "../../src/channels/supervisor.js";
import { saveWechatCredentials, wechatFingerprint } from "../../src/channels/wechat/credentials.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";
import { withFileLock } from "../../src/store/settings/locked-json.js";
import { InstantClock, ManualTimers, startWechat, tempHome, until, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

const exists = (p: string): Promise<boolean> => stat(p).then(() => true, () => false);
const deep = (n: number): string => "[".repeat(n) + "]".repeat(n);

async function home(): Promise<string> {
  const t = await tempHome();
  cleanups.push(t.cleanup);
  return t.home;
}

async function writeSettings(h: string, data: string | Buffer): Promise<string> {
  const p = configPath(h);
  await mkdir(dirname(p), { recursive: true });
  await writeFile(p, data);
  return p;
}

describe("channels/settings.json read by the bounded reader", () => {
  it("invalid UTF-8 is named, never decoded into U+FFFD and saved back", async () => {
    const h = await home();
    const p = await writeSettings(h, Buffer.concat([Buffer.from('{"accounts":{"wechat":{"a'), Buffer.from([0xff, 0xfe]), Buffer.from('":{}}}}')]));
    await assert.rejects(loadChannelsConfig(h), { message: `${p} cannot be read: it is not UTF-8 text; move it away` });
  });

  it("a leading byte order mark (a Windows editor's) is not part of the JSON", async () => {
    const h = await home();
    await writeSettings(h, "\ufeff" + JSON.stringify({ accounts: { wechat: { work: { senders: "anyone" } } } }));
    const c = await loadChannelsConfig(h);
    assert.equal(c.accounts.wechat["work"]?.senders, "anyone");
  });

  it("100k-deep nesting is named, with no stack overflow", async () => {
    const h = await home();
    const p = await writeSettings(h, `{"accounts":{},"x":${deep(100_000)}}`);
    await assert.rejects(loadChannelsConfig(h), { message: `${p} cannot be read: it nests deeper than 64 levels; move it away` });
  });

  it("a file of exactly the bound is read; one byte past it is named before a byte is read", async () => {
    const h = await home();
    const body = JSON.stringify({ accounts: { wechat: { big: {} } } });
    const p = await writeSettings(h, body);
    const fh = await open(p, "r+");
    try {
      await fh.write(Buffer.alloc(MAX_CHANNEL_FILE_BYTES - body.length, 0x20), 0, MAX_CHANNEL_FILE_BYTES - body.length, body.length);
    } finally {
      await fh.close();
    }
    assert.equal((await stat(p)).size, MAX_CHANNEL_FILE_BYTES);
    assert.deepEqual(Object.keys((await loadChannelsConfig(h)).accounts.wechat), ["big"]);
    await writeFile(p, " ", { flag: "a" });
    await assert.rejects(loadChannelsConfig(h), { message: `${p} cannot be read: it is too large (over 64 MiB); move it away` });
  });
});

describe("a WeChat account's delivery state file", () => {
  async function stateFor(h: string, fake: FakeIlink, extra: string): Promise<string> {
    const fp = wechatFingerprint({ bot_token: fake.token, bot_id: fake.botId, user_id: fake.ownerId, base_url: fake.base, cdn_url: fake.cdnBase, saved_unix_seconds: 0 });
    const p = channelPaths(h, "wechat", "default").state;
    await mkdir(dirname(p), { recursive: true });
    await writeFile(p, `{"version":1,"fingerprint":"${fp}","cursor":"c0","seen":[],"ignored":[],"in_flight":[],"held":{}${extra}}`);
    return p;
  }

  async function fakeIlink(): Promise<FakeIlink> {
    const f = await new FakeIlink().start();
    cleanups.push(() => f.close());
    return f;
  }

  it("100k-deep nesting is set aside with a log line, and messages are answered (not saved-and-failed for ever)", async () => {
    const h = await home();
    const fake = await fakeIlink();
    const p = await stateFor(h, fake, `,"checkpoint":{"a":${deep(100_000)}}`);
    const logs: string[] = [];
    await startWechat(cleanups, { home: h, fake, log: (l) => logs.push(l) });
    fake.push(fake.text("a@im.wechat", "hello"));
    await fake.waitSent((s) => s.some((m) => m.text === "echo: hello"));
    assert.ok(await exists(`${p}.corrupt`));
    assert.ok(
      logs.includes(`channels: ${p} cannot be read: it nests deeper than 64 levels; moved it to ${p}.corrupt and started with empty delivery state`),
      logs.join("\n"),
    );
  });

  it("with a byte order mark is used as it is: the saved cursor is kept", async () => {
    const h = await home();
    const fake = await fakeIlink();
    const p = await stateFor(h, fake, "");
    await writeFile(p, "\ufeff" + (await readFile(p, "utf8")).replace('"cursor":"c0"', '"cursor":"c7"'));
    await startWechat(cleanups, { home: h, fake });
    await fake.waitPolls(1);
    assert.equal(fake.polls[0]!.cursor, "c7");
    assert.ok(!(await exists(`${p}.corrupt`)));
  });

  it("invalid UTF-8 is set aside and said so in the log, never read as U+FFFD", async () => {
    const h = await home();
    const fake = await fakeIlink();
    const p = await stateFor(h, fake, "");
    const bad = Buffer.from((await readFile(p, "utf8")).replace('"cursor":"c0"', '"cursor":"c0\u00e9"'));
    bad[bad.indexOf(0xc3)] = 0xff; // é's first byte → an invalid one
    await writeFile(p, bad);
    const logs: string[] = [];
    await startWechat(cleanups, { home: h, fake, log: (l) => logs.push(l) });
    await fake.waitPolls(1);
    assert.equal(fake.polls[0]!.cursor, "", "started afresh");
    assert.ok(logs.some((l) => l.startsWith(`channels: ${p} cannot be read: it is not UTF-8 text; moved it to ${p}.corrupt`)), logs.join("\n"));
  });

  it("a FIFO in its place is never waited on: set aside, and the account answers", { skip: process.platform !== "linux" }, async () => {
    const h = await home();
    const fake = await fakeIlink();
    const p = channelPaths(h, "wechat", "default").state;
    await mkdir(dirname(p), { recursive: true });
    execFileSync("mkfifo", [p]);
    const logs: string[] = [];
    await startWechat(cleanups, { home: h, fake, log: (l) => logs.push(l) });
    fake.push(fake.text("a@im.wechat", "hi"));
    await fake.waitSent((s) => s.some((m) => m.text === "echo: hi"));
    assert.ok(logs.some((l) => l.startsWith(`channels: ${p} cannot be read: it is not a regular file (a FIFO, socket or device); moved it to ${p}.corrupt`)), logs.join("\n"));
  });

  it("one that cannot be read (not corrupt) is kept: its account says why, the other accounts start", async () => {
    const h = await home();
    const fake = await fakeIlink();
    const creds = { bot_token: fake.token, bot_id: fake.botId, user_id: fake.ownerId, base_url: fake.base, cdn_url: fake.cdnBase, saved_unix_seconds: 0 };
    for (const a of ["aaa", "zzz"]) {
      await saveWechatCredentials(channelPaths(h, "wechat", a).credentials, creds);
      await setAccount(h, "wechat", a, { senders: "anyone" });
    }
    // A link that loops: opening it fails (ELOOP) whatever the user running the test may read.
    const p = channelPaths(h, "wechat", "aaa").state;
    await mkdir(dirname(p), { recursive: true });
    await symlink(p, p);
    const logs: string[] = [];
    const sup = new ChannelSupervisor({ home: h, workspace: h, driver: new FakeSessionDriver(), clock: new InstantClock(), log: (l) => logs.push(l) });
    cleanups.push(() => sup.stop());
    await sup.reconcile();
    await until(() => sup.status().find((c) => c.id === "wechat:zzz")?.state === "connected");
    const bad = sup.status().find((c) => c.id === "wechat:aaa")!;
    assert.equal(bad.state, "failed");
    assert.equal(bad.error, `${p} cannot be read (ELOOP): check that it is a file your user may read`);
    assert.ok(!(await exists(`${p}.corrupt`)), "not taken for a corrupt file");
    assert.ok(logs.includes(`channels: wechat:aaa: ${bad.error}`));
  });
});

describe("the channel settings lock", () => {
  it("a change that cannot get the lock fails naming the file and what to do, at 5 s and not before", async () => {
    const h = await home();
    await setAccount(h, "wechat", "a", {});
    // Another berth process holding the lock (the same protocol; it holds until released).
    let release!: () => void;
    let held!: () => void;
    const isHeld = new Promise<void>((r) => (held = r));
    const holder = withFileLock(configPath(h), async () => {
      held();
      await new Promise<void>((r) => (release = r));
    });
    await isHeld;
    const timers = new ManualTimers();
    const out: { settled: unknown } = { settled: null };
    void setAccount(h, "wechat", "a", { senders: "anyone" }, { timers }).then(
      () => (out.settled = "changed"),
      (e: unknown) => (out.settled = e),
    );
    await until(() => timers.setCount >= 2); // the 5 s wait and its first retry are set
    timers.advance(4999);
    await until(() => timers.setCount >= 3); // retried at 4999 ms and waits again
    assert.equal(out.settled, null, "still waiting just before 5 s");
    timers.advance(1);
    await until(() => out.settled !== null);
    const err = out.settled as unknown;
    assert.ok(err instanceof Error, String(err));
    assert.equal(err.message, `${configPath(h)} is locked by another berth process (the daemon or another \`berth channel\`) for over 5 s: try again`);
    release();
    await holder;
    assert.equal((await loadChannelsConfig(h)).accounts.wechat["a"]?.senders, "owner", "the refused change was not made");
    await setAccount(h, "wechat", "a", { senders: "anyone" }, { timers: new ManualTimers() });
    assert.equal((await loadChannelsConfig(h)).accounts.wechat["a"]?.senders, "anyone", "once free, the lock is had at once");
  });
});
