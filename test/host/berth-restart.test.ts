/**
 * A real `berth daemon` killed mid-turn (SIGKILL) and started again on the same state: the AHP client finds the turn
 * it was watching ended with the spec's continuity gap ("restored disconnected host"), the text received before the
 * crash kept, its message not resent, and the session usable again.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { AhpClient, tempHome, until, type Json } from "./helpers.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { OBSERVATION_GAP_MESSAGE } from "../../src/protocols/host/managed-schema.js";
import { berthTurnStarted, daemonStarter, exited } from "./daemon-proc.js";

const startDaemon = daemonStarter();
const user = (text: string): Json => ({ text, origin: { kind: "user" } });

test("berth daemon killed mid-turn: after the restart the turn ends with the continuity gap, its received text kept", async () => {
  const fake = await startFakeProvider();
  try {
    const home = tempHome();
    const cwd = mkdtempSync(join(tmpdir(), "bh-restart-cwd-"));
    writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, MC_HOME: home, BERTH_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
    // The first answer streams some text, then holds until the client goes away.
    fake.script([{ steps: [{ text: "partial answer before the crash" }, { waitForAbort: true }] }]);

    const d1 = await startDaemon(env, cwd);
    const { c } = await AhpClient.init(d1.h, ["ahp-root://"]);
    const session = "ahp-session:/crash";
    const chat = await berthTurnStarted(c, session, cwd, "tell me");
    await c.action((e) => e.channel === chat && e.action.type === "chat/responsePart" && /partial answer/.test(JSON.stringify(e.action.part)), "streamed text", 15_000);
    // The turn's checkpoint holds that text on disk (read through SQLite, as the next daemon will).
    const db = new Database(join(home, "host", "host.db"), { readonly: true, fileMustExist: true });
    try {
      const held = () => ((db.prepare("SELECT extra FROM chats WHERE uri = ?").get(chat) as { extra: string } | undefined)?.extra ?? "").includes("partial answer before the crash");
      await until(held, 10_000, "the active turn checkpointed");
    } finally {
      db.close();
    }
    d1.proc.kill("SIGKILL");
    await exited(d1.proc);
    c.close();

    const d2 = await startDaemon(env, cwd);
    const { c: c2 } = await AhpClient.init(d2.h, ["ahp-root://"]);
    let state: Json = {};
    for (let i = 0; ; i++) {
      assert.ok(i < 2000, "the restored turn ends once Berth's runtime registers again");
      state = (await c2.request("subscribe", { channel: chat })).result.snapshot.state;
      if (state.activeTurn === undefined && (state.turns as Json[]).some((t) => t.id === "t1")) break;
      await new Promise((res) => setTimeout(res, 10));
    }
    const t1 = (state.turns as Json[]).find((t) => t.id === "t1")!;
    assert.equal(t1.state, "error");
    assert.equal(t1.message.text, "tell me");
    const parts = t1.responseParts as Json[];
    assert.match(parts.find((p) => p.kind === "markdown")!.content, /^partial answer before the crash/);
    const err = parts.find((p) => p.kind === "error")!;
    assert.equal(err.error.errorType, "source_observation_gap");
    assert.equal(err.error.message, OBSERVATION_GAP_MESSAGE);
    const asked = fake.requests.filter((q) => q.api === "openai-chat").length;
    assert.equal(asked, 1, "the message was not resent");
    // The session works again.
    c2.dispatch(chat, { type: "chat/turnStarted", turnId: "t2", startedAt: new Date().toISOString(), message: user("again") });
    const end = await c2.action((e) => e.channel === chat && ["chat/turnComplete", "chat/error"].includes(e.action.type) && e.action.turnId === "t2", "t2 ends", 15_000);
    assert.equal(end.action.type, "chat/turnComplete", JSON.stringify(end.action));
    assert.deepEqual(c2.invalid, []);
    c2.close();
    d2.proc.kill("SIGTERM");
    await exited(d2.proc);
  } finally {
    await fake.close();
  }
});
