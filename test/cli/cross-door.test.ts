/**
 * One session through every door, each a real process against the loopback fake provider: created by
 * `berth chat`, listed and resumed through the app-service (`berth service`), then visible and promptable from an
 * AHP client of `berth daemon --berth-runtime`. Each door's prompt reaches the model with the earlier ones.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { chat, chatEnv, FAKE, home } from "../chat/helpers.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { AhpClient, type Json } from "../host/helpers.js";
import { ended, startTurn } from "../host/berth-rig.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

interface Ready {
  ahp: string;
  http: string;
  token: string;
  backend_socket: string;
}

function userTexts(body: unknown): string[] {
  const msgs = (body as { messages: Array<{ role: string; content: unknown }> }).messages;
  return msgs.filter((m) => m.role === "user").map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
}

test("a session made by berth chat is listed and resumed by the app-service and promptable over AHP from berth daemon", async () => {
  const fake = await startFakeProvider();
  const h = home(fake.port);
  try {
    // 1. berth chat creates it.
    const p = chat(["-p", "from chat", "--json"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 0, p.stderr);
    const lines = p.stdout.trim().split("\n").map((l) => JSON.parse(l) as Json);
    const sessionId = lines.at(-1)!.session_id as string;
    assert.equal(lines.at(-1)!.assistant_text, "echo: from chat");

    // 2. The app-service lists it and resumes it.
    const svc = new ServiceProcess({ home: h, env: FAKE });
    try {
      await svc.initialize();
      const list = await svc.request("session.list", {});
      assert.ok((list.payload.sessions as Json[]).some((s) => s.session_id === sessionId && s.title === "from chat"), JSON.stringify(list.payload));
      const from = svc.lines.length;
      const r = await svc.request("turn.start", { prompt: "from app-service" }, { session_id: sessionId });
      assert.equal(r.payload.status, "accepted", JSON.stringify(r));
      for (let n = from + 1; ; n++) {
        await svc.waitLines(n);
        const m = JSON.parse(svc.lines[n - 1]!) as Json;
        if (m.event !== "turn.terminal") continue;
        assert.equal(m.payload.assistant_text, "echo: from app-service");
        break;
      }
    } finally {
      svc.end();
      await svc.exited;
    }
    assert.deepEqual(userTexts(fake.requests.at(-1)!.json).map((t) => t.includes("from chat")), [true, false]);

    // 3. berth daemon with Berth's runtime shows it to AHP clients, and a prompt there continues it.
    const env = chatEnv(h, FAKE);
    const d = spawn(process.execPath, [BERTH_BIN, "daemon", "--listen", "127.0.0.1:0", "--berth-runtime"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    d.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((r) => d.once("exit", (c) => r(c)));
    try {
      const ready = await new Promise<Ready>((resolve, reject) => {
        let buf = "";
        d.stdout.on("data", (b: Buffer) => {
          buf += b.toString();
          const i = buf.indexOf("\n");
          if (i >= 0) resolve(JSON.parse(buf.slice(0, i)) as Ready);
        });
        void exited.then((c) => reject(new Error(`daemon exited ${c}: ${stderr}`)));
      });
      const handle = { ahpUrl: ready.ahp, httpUrl: ready.http, token: ready.token, backendSocket: ready.backend_socket } as unknown as HostHandle;
      const { c } = await AhpClient.init(handle, ["ahp-root://"]);
      const ours = (s: Json): boolean => s.provider === "berth" && s.title === "from chat";
      const listed = ((await c.request("listSessions", {})).result.items as Json[]).find(ours);
      // Registered (dormant) as the runtime connected: listed already, or announced once the host took it.
      const item = listed ?? ((await c.note("root/sessionAdded", (n) => ours(n.summary as Json), 10_000)).summary as Json);
      const session = item.resource as string;
      const snap = (await c.request("subscribe", { channel: session })).result.snapshot;
      const chatUri = snap.state.defaultChat as string;
      await c.request("subscribe", { channel: chatUri });
      startTurn(c, chatUri, "x1", "from daemon");
      assert.equal((await ended(c, "x1")).action.type, "chat/turnComplete");
      const texts = userTexts(fake.requests.at(-1)!.json);
      assert.equal(texts.length, 3, "chat's, the app-service's and the daemon's prompts, one message each");
      assert.match(texts[0]!, /from chat/);
      assert.match(texts[1]!, /from app-service/);
      assert.match(texts[2]!, /from daemon/);
      // Tools run where the session was made: the working directory recorded in its header.
      const header = JSON.parse(readFileSync(join(h, "sessions", `${sessionId}.jsonl`), "utf8").split("\n")[0]!) as { cwd: string };
      const system = (fake.requests.at(-1)!.json as { messages: Array<{ role: string; content: unknown }> }).messages.find((m) => m.role === "system");
      assert.match(JSON.stringify(system?.content), new RegExp(`Working directory: ${header.cwd.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
      c.close();
    } finally {
      d.kill("SIGTERM");
      await exited;
    }
  } finally {
    await fake.close();
  }
});
