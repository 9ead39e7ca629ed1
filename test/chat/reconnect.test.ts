/**
 * `berth chat` when its server stops: the daemon killed mid-answer (left a zombie by a parent that never reaps it, as
 * a daemon whose parent is gone can be), then `berth stdio` children killed one after another. The chat connects
 * again each time and resumes the conversation (the interrupted answer's text is in the history the provider gets
 * next), until the fourth loss in a row with no completed turn between, when it exits 1 saying how to resume.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { MAX_RECONNECTS } from "../../src/cli/chat/interactive.js";
import { startDaemon } from "../scv/client.js";
import { until } from "../host/helpers.js";
import { chat, chatEnv, FAKE, home } from "./helpers.js";

/** The `berth stdio` children of process `parent`. */
function stdioChildren(parent: number): number[] {
  const out = execFileSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" });
  return out
    .split("\n")
    .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && Number(m[2]) === parent && m[3]!.includes("bin/berth stdio"))
    .map((m) => Number(m[1]));
}

const count = (s: string, re: RegExp): number => s.match(new RegExp(re.source, "g"))?.length ?? 0;

describe("berth chat reconnects when its server stops", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("resumes the conversation after the daemon is killed mid-answer, and gives up after the fourth loss in a row", { timeout: 120_000 }, async () => {
    const h = home(fake.port);
    const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
    const env = chatEnv(h, { ...FAKE, SCV_HOME: scvHome });
    // The daemon's parent execs `sleep`, which never reaps it: once killed it stays a zombie, its PID still taken.
    const wrapper = spawn("sh", ["-c", `"$0" "$1" daemon & echo "daemon $!"; exec sleep 600`, process.execPath, BERTH_BIN], { env, stdio: ["ignore", "pipe", "ignore"] });
    let wrapperOut = "";
    wrapper.stdout.setEncoding("utf8").on("data", (d: string) => (wrapperOut += d));
    try {
      await until(() => wrapperOut.includes('"ready":true'), 60_000, "the daemon's ready line");
      const daemonPid = Number(/daemon (\d+)/.exec(wrapperOut)![1]);

      fake.script([{ steps: [{ text: "partial words " }, { waitForAbort: true }] }]);
      const p = chat([], env);
      p.write("first prompt\n");
      await p.until(/partial words/);
      assert.match(p.stdout, /via berth daemon/);
      // The interrupted answer is on disk before the daemon dies (the recorder writes text as it streams).
      const sessions = join(h, "sessions");
      await until(() => existsSync(sessions) && readdirSync(sessions).some((f) => f.endsWith(".jsonl") && readFileSync(join(sessions, f), "utf8").includes("partial words")), 60_000, "the partial answer on disk");

      process.kill(daemonPid, "SIGKILL");
      // The chat's own choice (MC_MODEL) ran on the daemon and runs here alike: no model is named.
      await p.until(/connected to a berth stdio server of this chat's own: this conversation continues without the berth daemon; an interrupted answer is kept in its history\n/);
      assert.match(readFileSync(`/proc/${daemonPid}/stat`, "utf8"), /\) Z /, "the killed daemon is a zombie: its session lock's owner PID still exists");
      assert.match(p.stdout, /error: the Berth server connection ended[^\n]*\n(?:[^\n]*\n)?The Berth server stopped\./);

      const before = fake.requests.length;
      p.write("second prompt\n");
      await p.until(/echo: second prompt/);
      const req = (await fake.waitForRequests(before + 1))[before]!;
      const messages = (req.json as { messages: { role: string; content: unknown }[] }).messages;
      const text = (m: { content: unknown }): string => (typeof m.content === "string" ? m.content : JSON.stringify(m.content));
      const users = messages.filter((m) => m.role === "user").map(text);
      assert.ok(users.some((t) => t.includes("first prompt")) && users.at(-1)!.includes("second prompt"), "the same conversation continues");
      assert.ok(messages.some((m) => m.role === "assistant" && text(m).includes("partial words")), "the interrupted answer is in its history");

      // Losses in a row with no completed turn between: the chat reconnects after each of MAX_RECONNECTS, then stops.
      assert.equal(MAX_RECONNECTS, 3);
      let killed = new Set<number>();
      for (let loss = 1; loss <= MAX_RECONNECTS + 1; loss++) {
        let child = 0;
        await until(() => (child = stdioChildren(p.child.pid!).find((c) => !killed.has(c)) ?? 0) !== 0, 60_000, "a new berth stdio child");
        killed = new Set([...killed, child]);
        const connected = count(p.stdout, /connected to a berth stdio server/);
        process.kill(child, "SIGKILL");
        if (loss <= MAX_RECONNECTS) await until(() => count(p.stdout, /connected to a berth stdio server/) === connected + 1, 60_000, "the chat to connect again");
      }
      assert.equal(await p.exited, 1, p.stderr);
      assert.match(p.stdout, /The server stopped 4 times in a row; not connecting again\. Start berth chat again; `berth chat --session s\w+-\w+` continues this conversation\./);
      assert.equal(count(p.stdout, /connected to a berth stdio server/), 1 + MAX_RECONNECTS);
    } finally {
      wrapper.kill("SIGKILL");
    }
  });

  it("a daemon that ran a model of its own: once it is gone, one line says the chat goes on without it and names the model now used", { timeout: 60_000 }, async () => {
    // The settings select fake/m-one; the daemon's own MC_MODEL selects m-two, which the chat (choosing nothing) ran.
    const h = mkdtempSync(join(tmpdir(), "berth-models-"));
    const def = { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none", models: [{ id: "m-one" }, { id: "m-two" }] };
    writeFileSync(join(h, "settings.json"), JSON.stringify({ providers: { fake: def }, provider: "fake", model: "m-one" }));
    const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
    const d = await startDaemon({ MC_HOME: h, SCV_HOME: scvHome, MC_MODEL: "m-two" });
    const p = chat([], chatEnv(h, { SCV_HOME: scvHome }));
    try {
      await p.until(/via berth daemon[^]*· model fake\/m-two · /);
      p.write("first prompt\n");
      await p.until(/echo: first prompt/);
      d.child.kill("SIGKILL");
      const [line] = await p.until(/ {2}· connected to a berth stdio server[^\n]*\n/);
      assert.equal(
        line,
        "  · connected to a berth stdio server of this chat's own: this conversation continues without the berth daemon, now with model fake/m-one (the daemon ran fake/m-two); an interrupted answer is kept in its history\n",
      );
      // The model named is the one the next turn uses.
      const from = fake.requests.length;
      p.write("second prompt\n");
      await p.until(/echo: second prompt/);
      assert.deepEqual(fake.requests.slice(from).map((r) => (r.json as { model?: unknown }).model), ["m-one"]);
    } finally {
      p.child.kill("SIGKILL");
      await p.exited;
      await d.stop();
    }
  });

  it("-p through a daemon killed mid-answer: the text so far, a failed turn.terminal, the cause and how to continue, exit 1", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
    for (const json of [true, false]) {
      const d = await startDaemon({ MC_HOME: h, SCV_HOME: scvHome, ...FAKE });
      try {
        fake.script([{ steps: [{ text: "partial words " }, { waitForAbort: true }] }]);
        const p = chat(["-p", `prompt json=${json}`, ...(json ? ["--json"] : [])], chatEnv(h, { ...FAKE, SCV_HOME: scvHome }));
        // With --json the delta is seen arriving; without, the answer so far is on disk (it may not have reached the chat).
        if (json) await p.until(/"turn\.assistant_delta"/);
        else await until(() => readdirSync(join(h, "sessions")).some((f) => readFileSync(join(h, "sessions", f), "utf8").includes("prompt json=false")), 60_000, "the turn on disk");
        d.child.kill("SIGKILL");
        assert.equal(await p.exited, 1, p.stderr);
        const sid = /^session (\S+)$/m.exec(p.stderr)?.[1];
        assert.ok(sid !== undefined, p.stderr);
        assert.match(p.stderr, new RegExp(`the turn failed \\(server_stopped: the Berth server stopped during the turn \\([^\n]*\\); the session keeps the answer so far: berth chat --session ${sid} continues it\\)`));
        if (!json) continue;
        const last = JSON.parse(p.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
        assert.equal(last.event, "turn.terminal");
        assert.equal(last.status, "failed");
        assert.equal(last.code, "server_stopped");
        assert.equal(last.session_id, sid);
        assert.equal(last.assistant_text, "partial words ");
      } finally {
        await d.stop();
      }
    }
  });
});
