/**
 * A daemon socket path that cannot reach a daemon, as a new user meets it: a regular file in the socket's place,
 * `SCV_HOME` naming a regular file, `SCV_HOME` holding the socket a killed daemon left behind. The chat still
 * serves itself with the same answer, but no longer in silence: one line names the cause and the fix (the banner's,
 * or stderr with -p). No socket at all (no daemon running) stays silent.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { chat, chatEnv, FAKE, home } from "./helpers.js";

const noTrace = (s: string): void => assert.doesNotMatch(s, /\n\s+at |Error:/);

/** `-p` and one piped prompt with `env`: both answer; the -p stderr and the interactive stdout for checking. */
async function both(env: NodeJS.ProcessEnv): Promise<{ err: string; out: string }> {
  const p = chat(["-p", "hello"], env);
  assert.equal(await p.exited, 0, p.stderr);
  assert.equal(p.stdout, "echo: hello\n");
  noTrace(p.stderr);
  const i = chat([], env, { stdin: "hello\n" });
  assert.equal(await i.exited, 0, i.stdout + i.stderr);
  assert.match(i.stdout, /echo: hello/);
  assert.doesNotMatch(i.stdout, /via berth daemon/);
  noTrace(i.stderr);
  return { err: p.stderr, out: i.stdout };
}

/** A socket whose listener was killed (SIGKILL leaves the file): connections to it are refused. */
async function leftoverSocket(path: string): Promise<void> {
  const c = spawn(process.execPath, ["-e", `require("node:net").createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, "SIGKILL"))`]);
  await new Promise((resolve) => c.once("close", resolve));
}

describe("berth chat with a daemon socket path that reaches no daemon", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("no socket file (no daemon running): nothing is said", async () => {
    const r = await both(chatEnv(home(fake.port), { ...FAKE, SCV_HOME: mkdtempSync(join(tmpdir(), "berth-scv-")) }));
    assert.match(r.err, /^session \S+\n$/);
    assert.doesNotMatch(r.out, /daemon/);
  });

  it("a regular file in the socket's place (default path and SCV_HOME): named, with the fix", async () => {
    const h = home(fake.port);
    mkdirSync(join(h, "state"));
    const sock = join(h, "state", "server.sock");
    writeFileSync(sock, "");
    const want = `${sock} is a regular file, not a berth daemon's socket (berth daemon cannot start while it is there): remove it; this chat serves itself meanwhile`;
    const r = await both(chatEnv(h, FAKE));
    assert.ok(r.err.startsWith(`berth chat: ${want}\nsession `), r.err);
    assert.ok(r.out.includes(`  · ${want}\n`), r.out);
    const scv = mkdtempSync(join(tmpdir(), "berth-scv-"));
    mkdirSync(join(scv, "state"));
    writeFileSync(join(scv, "state", "server.sock"), "");
    const s = await both(chatEnv(h, { ...FAKE, SCV_HOME: scv }));
    assert.ok(s.err.includes(`berth chat: ${join(scv, "state", "server.sock")} is a regular file, not a berth daemon's socket`), s.err);
  });

  it("SCV_HOME naming a regular file: the file is named, with the fix", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "berth-scv-")), "notes.txt");
    writeFileSync(file, "");
    const want = `SCV_HOME=${file} cannot hold a berth daemon's socket: ${file} is a file, not a directory; set SCV_HOME to the directory berth daemon was started with (or unset it); this chat serves itself meanwhile`;
    const r = await both(chatEnv(home(fake.port), { ...FAKE, SCV_HOME: file }));
    assert.ok(r.err.startsWith(`berth chat: ${want}\nsession `), r.err);
    assert.ok(r.out.includes(`  · ${want}\n`), r.out);
  });

  it("SCV_HOME holding a killed daemon's socket: named as left behind, with the fix", async () => {
    const scv = mkdtempSync(join(tmpdir(), "berth-scv-"));
    mkdirSync(join(scv, "state"));
    const sock = join(scv, "state", "server.sock");
    await leftoverSocket(sock);
    const want = `no berth daemon answers at ${sock} (a socket left behind by a daemon that stopped): start berth daemon with this SCV_HOME to use one, or unset SCV_HOME; this chat serves itself meanwhile`;
    const r = await both(chatEnv(home(fake.port), { ...FAKE, SCV_HOME: scv }));
    assert.ok(r.err.startsWith(`berth chat: ${want}\nsession `), r.err);
    assert.ok(r.out.includes(`  · ${want}\n`), r.out);
  });
});
