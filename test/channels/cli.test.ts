/**
 * `berth channel` as a user runs it (spawned `bin/berth`), against the loopback iLink and Feishu fakes named in
 * `$MC_HOME/channels/settings.json`: QR login rendered as text, credentials owner-only and never printed, origin
 * checks, App ID + Secret and scan sign-in, status, set and logout.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { chmod, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { FakeFeishu } from "../fakes/fake-feishu.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { tempHome, runCleanups } from "./helpers.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await runCleanups(cleanups.splice(0).reverse());
});

function berth(home: string, args: string[], env: Record<string, string> = {}, stdin = ""): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BERTH_BIN, "channel", ...args], { env: { ...process.env, MC_HOME: home, NO_PROXY: "127.0.0.1", ...env }, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.stdin.end(stdin);
    // "close", not "exit": only then has all of stdout and stderr been read.
    child.on("close", (code) => resolve({ code: code ?? -1, out, err }));
  });
}

async function homeWith(endpoints: Record<string, unknown>): Promise<string> {
  const t = await tempHome();
  cleanups.push(t.cleanup);
  await mkdir(join(t.home, "channels"), { recursive: true, mode: 0o700 });
  await writeFile(join(t.home, "channels", "settings.json"), JSON.stringify({ endpoints }));
  return t.home;
}

describe("berth channel login wechat", () => {
  it("shows a text QR, follows a redirect, saves validated credentials 0600 and never prints the token", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.qrScript = [{ status: "wait" }, { status: "scaned" }, { status: "scaned_but_redirect" }, { status: "confirmed" }];
    const home = await homeWith({ wechat: { api: fake.base, cdn: fake.cdnBase } });
    const r = await berth(home, ["login", "wechat", "--account", "work"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /[▀▄█]/);
    assert.match(r.out, /Scanned: confirm the login on your phone/);
    assert.match(r.out, /Logged in wechat:work/);
    assert.ok(!r.out.includes(fake.token) && !r.err.includes(fake.token));
    const path = join(home, "channels", "wechat", "work.json");
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    const creds = JSON.parse(await readFile(path, "utf8")) as Record<string, string>;
    assert.equal(creds["bot_token"], fake.token);
    assert.equal(creds["user_id"], fake.ownerId);
    const st = await berth(home, ["status", "--json"]);
    const comps = (JSON.parse(st.out) as { components: Array<Record<string, unknown>> }).components;
    assert.deepEqual(comps.map((c) => [c["id"], c["state"], c["bot_id"], c["remote_tools"]]), [["wechat:work", "stopped", fake.botId, "none"]]);
    assert.ok(!st.out.includes(fake.token));
  });

  it("refuses a confirmed login whose baseurl is not WeChat's, and saves nothing", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.qrScript = [{ status: "confirmed", fields: { baseurl: "https://evil.example.com" } }];
    const home = await homeWith({ wechat: { api: fake.base, cdn: fake.cdnBase } });
    const r = await berth(home, ["login", "wechat"]);
    assert.equal(r.code, 1);
    assert.match(r.err, /not WeChat's; login refused/);
    await assert.rejects(stat(join(home, "channels", "wechat", "default.json")));
  });

  it("asks for the pairing code WeChat shows, asks again after a wrong one, and logs in with the right one", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.qrScript = [{ status: "scaned" }, { status: "need_verifycode" }, { status: "confirmed" }];
    const home = await homeWith({ wechat: { api: fake.base, cdn: fake.cdnBase } });
    const r = await berth(home, ["login", "wechat"], {}, `1111\n${fake.pairingCode}\n`);
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(fake.codesTried, ["1111", fake.pairingCode]);
    assert.match(r.out, /Type the number shown in WeChat on your phone: /);
    assert.match(r.out, /The code did not match; type the number shown in WeChat again: /);
    assert.match(r.out, /Logged in wechat:default/);
  });

  it("a QR code blocked after three wrong pairing codes is replaced; no code typed ends the login", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.qrScript = [{ status: "need_verifycode" }, { status: "need_verifycode" }, { status: "confirmed" }];
    const home = await homeWith({ wechat: { api: fake.base, cdn: fake.cdnBase } });
    const r = await berth(home, ["login", "wechat"], {}, `1\n2\n3\n${fake.pairingCode}\n`);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /Too many wrong pairing codes: this QR code is blocked/);
    assert.equal(fake.qrCodesIssued, 2, "a new QR code after the block");
    assert.deepEqual(fake.codesTried, ["1", "2", "3", fake.pairingCode]);
    const none = await new FakeIlink().start();
    cleanups.push(() => none.close());
    none.qrScript = [{ status: "need_verifycode" }];
    const home2 = await homeWith({ wechat: { api: none.base, cdn: none.cdnBase } });
    const r2 = await berth(home2, ["login", "wechat"], {}, "");
    assert.equal(r2.code, 1);
    assert.match(r2.err, /pairing code shown on your phone, and none was typed/);
    await assert.rejects(stat(join(home2, "channels", "wechat", "default.json")));
  });

  it("refreshes an expired QR code, and gives up after three refreshes", async () => {
    const fake = await new FakeIlink().start();
    cleanups.push(() => fake.close());
    fake.qrScript = [{ status: "expired" }, { status: "expired" }, { status: "expired" }, { status: "expired" }];
    const home = await homeWith({ wechat: { api: fake.base, cdn: fake.cdnBase } });
    const r = await berth(home, ["login", "wechat"]);
    assert.equal(r.code, 1);
    assert.equal(fake.qrCodesIssued, 4);
    assert.match(r.err, /expired 3 times/);
  });
});

describe("berth channel login feishu|lark", () => {
  it("App ID + App Secret (from the environment) are checked against the platform and saved", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    const home = await homeWith({ feishu: { open: fake.base, accounts: fake.base } });
    const bad = await berth(home, ["login", "feishu", "--app-id", fake.appId], { BERTH_FEISHU_APP_SECRET: "wrong" });
    assert.equal(bad.code, 1);
    assert.match(bad.err, /rejected the App ID or App Secret/);
    const ok = await berth(home, ["login", "feishu", "--app-id", fake.appId, "--owner", "ou_owner1"], {}, fake.appSecret + "\n");
    assert.equal(ok.code, 0, ok.err);
    assert.ok(!ok.out.includes(fake.appSecret));
    const creds = JSON.parse(await readFile(join(home, "channels", "feishu", "default.json"), "utf8")) as Record<string, string>;
    assert.equal(creds["owner_open_id"], "ou_owner1");
    assert.equal((await stat(join(home, "channels", "feishu", "default.json"))).mode & 0o777, 0o600);
  });

  it("a malformed App ID is refused before any request", async () => {
    const home = await homeWith({});
    const r = await berth(home, ["login", "lark", "--app-id", "cli_short"], { BERTH_FEISHU_APP_SECRET: "x" });
    assert.equal(r.code, 1);
    assert.match(r.err, /cli_ followed by 16 hex digits/);
  });

  it("sign-in by scan saves the app and the scanner as owner", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    const home = await homeWith({ feishu: { open: fake.base, accounts: fake.base } });
    const r = await berth(home, ["login", "feishu"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /[▀▄█]/);
    const creds = JSON.parse(await readFile(join(home, "channels", "feishu", "default.json"), "utf8")) as Record<string, string>;
    assert.equal(creds["app_id"], fake.appId);
    assert.equal(creds["owner_open_id"], "ou_scanner000001");
    assert.ok(!r.out.includes(fake.appSecret));
  });
});

describe("berth channel login (Lark tenant)", () => {
  it("a scan by a Lark tenant saves a Lark account against the Lark endpoints", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    fake.registrationBrand = "lark";
    fake.registrationScript = [];
    const home = await homeWith({ feishu: { open: "https://open.feishu.invalid", accounts: fake.base }, lark: { open: fake.base, accounts: fake.base } });
    const r = await berth(home, ["login", "feishu"]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /Logged in lark:default/);
    const creds = JSON.parse(await readFile(join(home, "channels", "feishu", "default.json"), "utf8")) as Record<string, string>;
    assert.equal(creds["brand"], "lark");
    assert.equal(creds["open_url"], fake.base);
  });

  it("a declined scan fails with a fixed message and saves nothing", async () => {
    const fake = await new FakeFeishu().start();
    cleanups.push(() => fake.close());
    fake.registrationScript = ["access_denied"];
    const home = await homeWith({ feishu: { open: fake.base, accounts: fake.base } });
    const r = await berth(home, ["login", "feishu"]);
    assert.equal(r.code, 1);
    assert.match(r.err, /declined on the phone/);
    await assert.rejects(stat(join(home, "channels", "feishu", "default.json")));
  });
});

describe("berth channel set/logout", () => {
  it("persists only the given fields; logout removes credentials, state and settings", async () => {
    const home = await homeWith({});
    const s1 = await berth(home, ["set", "wechat", "--remote-tools", "owner", "--workspace", "/tmp"]);
    assert.equal(s1.code, 0, s1.err);
    const s2 = await berth(home, ["set", "wechat", "--disable"]);
    assert.deepEqual(JSON.parse(s2.out), { enabled: false, workspace: "/tmp", remote_tools: "owner", senders: "owner" });
    const bad = await berth(home, ["set", "slack"]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /unknown channel 'slack' \(wechat, feishu or lark\)/);
    // Each part of a wrong command line is named for what it is.
    for (const [args, said] of [
      [["set"], "berth channel: set needs a channel: wechat, feishu or lark"],
      [["bogus", "wechat"], "berth channel: unknown subcommand 'bogus' (login, logout, set or status)"],
      [[], "berth channel: missing subcommand (login, logout, set or status)"],
    ] as const) {
      const r = await berth(home, [...args]);
      assert.equal(r.code, 2, args.join(" "));
      assert.ok(r.err.startsWith(`${said}\n`), r.err);
    }
    const rel = await berth(home, ["set", "wechat", "--workspace", "rel/path"]);
    assert.equal(rel.code, 2);
    const out = await berth(home, ["logout", "wechat"]);
    assert.equal(out.code, 0, out.err);
    assert.equal(out.out, "Logged out wechat:default; its credentials and delivery state are removed.\n");
    const st = await berth(home, ["status", "--json"]);
    assert.deepEqual(JSON.parse(st.out), { components: [] });
    // A second logout (or one of an account never logged in) says there was nothing, not that it removed something.
    for (const args of [["logout", "wechat"], ["logout", "feishu", "--account", "work"]]) {
      const again = await berth(home, args);
      assert.equal(again.code, 0, again.err);
      assert.match(again.out, /^(wechat:default|feishu:work) is not logged in; nothing to remove \(`berth channel status` lists the accounts\)\.\n$/);
    }
  });
});

describe("berth channel set with no daemon, run by several people at once", () => {
  it("keeps every account: each process's change is made under the settings file's lock, none is lost", async () => {
    const home = await homeWith({});
    const names = ["a1", "a2", "a3", "a4", "a5", "a6"];
    const runs = await Promise.all(names.map((n) => berth(home, ["set", "wechat", "--account", n, "--senders", "anyone"])));
    for (const r of runs) assert.equal(r.code, 0, r.err);
    const saved = JSON.parse(await readFile(join(home, "channels", "settings.json"), "utf8")) as { accounts: { wechat: Record<string, { senders: string }> } };
    assert.deepEqual(Object.keys(saved.accounts.wechat).sort(), names);
    assert.ok(Object.values(saved.accounts.wechat).every((e) => e.senders === "anyone"));
  });
});

describe("berth channel with something other than a file in the way", () => {
  it("a FIFO at settings.json or at an account's saved login is never waited on: the file is named", { skip: process.platform !== "linux" }, async () => {
    const home = await homeWith({});
    const settings = join(home, "channels", "settings.json");
    await rm(settings);
    execFileSync("mkfifo", [settings]);
    // With no writer, opening the FIFO to read would wait for ever: each command must end at once, naming the file.
    for (const args of [["status"], ["set", "wechat", "--disable"]]) {
      const r = await berth(home, args);
      assert.equal(r.code, 1, args.join(" "));
      assert.equal(r.err, `berth channel: ${settings} cannot be read: it is not a regular file (a FIFO, socket or device); move it away\n`);
    }
    // A FIFO in place of an account's saved login: that account reads as one to log in again, the others unharmed.
    await rm(settings);
    await writeFile(settings, JSON.stringify({ endpoints: {} }));
    assert.equal((await berth(home, ["set", "wechat"])).code, 0);
    assert.equal((await berth(home, ["set", "feishu"])).code, 0);
    await mkdir(join(home, "channels", "wechat"), { recursive: true, mode: 0o700 });
    execFileSync("mkfifo", [join(home, "channels", "wechat", "default.json")]);
    const st = await berth(home, ["status", "--json"]);
    assert.equal(st.code, 0, st.err);
    const comps = (JSON.parse(st.out) as { components: Array<{ id: string; error: string | null }> }).components;
    assert.deepEqual(
      comps.map((c) => [c.id, c.error]),
      [
        ["feishu:default", "no saved login: run `berth channel login feishu` (or `berth channel login lark` for a Lark account)"],
        ["wechat:default", "the saved login cannot be read: run `berth channel login wechat` again"],
      ],
    );
  });
});

describe("berth channel status with no accounts", () => {
  it("says there are none and how to add one, instead of `0 of 0`", async () => {
    const home = await homeWith({});
    const r = await berth(home, ["status"]);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, "Channels: no chat accounts yet. Add one with `berth channel login wechat` or `berth channel login feishu`.\n");
    const j = await berth(home, ["status", "--json"]);
    assert.deepEqual(JSON.parse(j.out), { components: [] });
  });
});

describe("berth channel in a home others may write", () => {
  it("refuses status and set, naming the directory and the chmod fix, and changes nothing", async () => {
    const home = await homeWith({});
    await chmod(home, 0o770);
    for (const args of [["status"], ["set", "wechat", "--remote-tools", "owner"]]) {
      const r = await berth(home, args);
      assert.equal(r.code, 1, args.join(" "));
      assert.equal(r.out, "");
      assert.equal(r.err, `berth channel: the state directory ${home} is writable by its group (mode 770); fix it with: chmod 700 ${home}\n`);
    }
    assert.equal(JSON.stringify(JSON.parse(await readFile(join(home, "channels", "settings.json"), "utf8"))), JSON.stringify({ endpoints: {} }));
    await chmod(home, 0o700);
    assert.equal((await berth(home, ["status"])).code, 0);
  });

  it("status of a home that does not exist yet creates nothing", async () => {
    const t = await tempHome();
    cleanups.push(t.cleanup);
    const missing = join(t.home, "not-yet");
    const r = await berth(missing, ["status"]);
    assert.equal(r.code, 0, r.err);
    await assert.rejects(stat(missing));
  });
});

describe("berth channel status's login advice", () => {
  it("names the account to sign in again, and lark beside feishu when the brand is unknown", async () => {
    const home = await homeWith({});
    assert.equal((await berth(home, ["set", "wechat", "--account", "work"])).code, 0);
    assert.equal((await berth(home, ["set", "lark", "--account", "team"])).code, 0);
    const st = await berth(home, ["status", "--json"]);
    assert.equal(st.code, 0, st.err);
    const comps = (JSON.parse(st.out) as { components: Array<{ id: string; error: string | null }> }).components;
    assert.deepEqual(
      comps.map((c) => [c.id, c.error]),
      [
        ["feishu:team", "no saved login: run `berth channel login feishu --account team` (or `berth channel login lark --account team` for a Lark account)"],
        ["wechat:work", "no saved login: run `berth channel login wechat --account work`"],
      ],
    );
  });
});
