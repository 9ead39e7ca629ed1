/**
 * SCV sessions and plain turns over both transports: session.start validation and canonicalization, the limit
 * fields, the queue snapshot, one session per connection, the turn event sequence with one monotonic seq, prompt
 * bounds (at and one past 256 KiB), session.clear, no_tools, channel, per-session model override, durability
 * (visible to the app-service session.list).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_PROMPT_BYTES } from "../../src/protocols/scv/wire.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { TRANSPORTS, type Msg } from "./client.js";
import { useRig } from "./rig.js";

const LIMIT_FIELDS = {
  max_server_frame_bytes: 8388608,
  max_transcript_bytes: 8388608,
  max_transcript_items: 10000,
  max_prompt_history_bytes: 1048576,
  max_prompt_history_items: 200,
};

for (const name of TRANSPORTS) {
  describe(`scv sessions over ${name}`, () => {
    const suite = useRig(name);

    it("validates and canonicalizes cwd, reports every limit field, then a queue.snapshot with request_id null", async () => {
      const c = await suite.t.open();
      await c.initialize();
      const dir = mkdtempSync(join(tmpdir(), "scv-ws-"));
      const file = join(dir, "f.txt");
      writeFileSync(file, "x");
      const link = join(mkdtempSync(join(tmpdir(), "scv-link-")), "ws");
      symlinkSync(dir, link);
      for (const [cwd, message] of [
        ["relative/dir", "cwd must be an absolute path"],
        [join(dir, "missing"), "cwd does not exist"],
        [file, "cwd is not a directory"],
      ] as const) {
        const id = c.request({ type: "session.start", cwd });
        assert.deepEqual(await c.reply(id, ["session.started"]), { type: "error", request_id: id, code: "invalid_request", message, fatal: false });
      }
      for (const [extra, message] of [
        [{ provider: "nope" }, "unknown provider; declare it under `providers` in settings.json"],
        [{ base_url: "ftp://example" }, "`base_url` must be an http(s) URL"],
        [{ channel: "We\u0007Chat" }, "`channel` must be at most 32 bytes without control characters"],
        [{ delegation_depth: -1 }, "`delegation_depth` must be a non-negative integer"],
      ] as const) {
        const r = c.request({ type: "session.start", cwd: dir, ...extra });
        assert.deepEqual(await c.reply(r, ["session.started"]), { type: "error", request_id: r, code: "invalid_request", message, fatal: false });
      }
      const id = c.request({ type: "session.start", cwd: link });
      const started = await c.reply(id, ["session.started"]);
      assert.equal(started.type, "session.started");
      assert.equal(started.cwd, realpathSync(dir));
      assert.equal(started.model, "fake-model");
      assert.equal(typeof started.context_max_tokens, "number");
      for (const [k, v] of Object.entries(LIMIT_FIELDS)) assert.equal(started[k], v, k);
      const i = c.frames.indexOf(started);
      const snap = c.frames[i + 1]!;
      assert.equal(snap.type, "queue.snapshot");
      assert.equal(snap.request_id, null);
      assert.equal(snap.session_id, started.session_id);
      assert.deepEqual(snap.entries, []);
      assert.equal(snap.paused, false);
      const again = c.request({ type: "session.start", cwd: dir });
      assert.equal((await c.reply(again, [])).code, "invalid_request");
      const other = c.request({ type: "turn.start", session_id: "someone-else", prompt: "hi" });
      assert.equal((await c.reply(other, [])).code, "session_not_found");
      c.end();
      await c.closed;
    });

    it("runs a turn: started, deltas, completed per response, turn.completed; one gapless seq", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const { requestId, terminal, frames } = await c.turn(s.session_id as string, "hello there");
      assert.equal(terminal.type, "turn.completed");
      const types = frames.map((m) => m.type as string);
      assert.equal(types[0], "turn.started");
      assert.equal(types.at(-1), "turn.completed");
      assert.equal(types.at(-2), "assistant.completed");
      const deltas = frames.filter((m) => m.type === "assistant.delta").map((m) => m.content as string);
      assert.ok(deltas.length >= 1);
      assert.equal(deltas.join(""), "echo: hello there");
      assert.equal(frames.at(-2)!.content, "echo: hello there");
      const turnId = frames[0]!.turn_id as string;
      for (const m of frames) {
        assert.equal(m.request_id, requestId);
        assert.equal(m.session_id, s.session_id);
        assert.equal(m.turn_id, turnId);
      }
      assert.equal(terminal.steps, 1);
      assert.equal(typeof terminal.usage, "object");
      const second = await c.turn(s.session_id as string, "again");
      assert.equal(second.terminal.type, "turn.completed");
      // sent right after a terminal event, a prompt starts at once: no queue round trip
      assert.deepEqual(second.frames.filter((m) => m.type.startsWith("queue.")), []);
      assert.deepEqual(c.seqErrors, []);
      assert.ok((second.frames[0]!.seq as number) > (terminal.seq as number));
      c.end();
      await c.closed;
    });

    it("accepts a prompt of exactly 256 KiB and refuses one byte more with invalid_request", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const over = c.request({ type: "turn.start", session_id: s.session_id, prompt: "é".repeat(MAX_PROMPT_BYTES / 2 - 1) + "xy" + "z" });
      const e = await c.reply(over, ["turn.started"]);
      assert.deepEqual([e.type, e.code, e.message], ["error", "invalid_request", "prompt exceeds 262144 bytes; shorten it, or save the text to a file and attach it"]);
      const at = await c.turn(s.session_id as string, "é".repeat(MAX_PROMPT_BYTES / 2 - 1) + "xy");
      assert.equal(at.terminal.type, "turn.completed");
      const empty = c.request({ type: "turn.start", session_id: s.session_id, prompt: "" });
      assert.equal((await c.reply(empty, ["turn.started"])).code, "invalid_request");
      c.end();
      await c.closed;
    });

    it("session.clear: refused while a turn runs, then session.cleared with seq still rising and an empty context", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      await c.turn(sid, "remember this");
      suite.rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
      const from = c.frames.length;
      const rid = c.request({ type: "turn.start", session_id: sid, prompt: "slow" });
      const started = await c.waitFor((m) => m.request_id === rid && m.type === "assistant.delta", from);
      const busy = c.request({ type: "session.clear", session_id: sid });
      assert.equal((await c.reply(busy, ["session.cleared"])).code, "turn_active");
      c.request({ type: "turn.cancel", session_id: sid, turn_id: started.turn_id });
      const cancelled = await c.waitFor((m) => m.request_id === rid && m.type === "turn.cancelled", from);
      const clear = c.request({ type: "session.clear", session_id: sid });
      const cleared = await c.reply(clear, ["session.cleared"]);
      assert.equal(cleared.type, "session.cleared");
      assert.ok((cleared.seq as number) > (cancelled.seq as number));
      const n = suite.rig.fake.requests.length;
      await c.turn(sid, "fresh");
      const body = JSON.stringify(suite.rig.fake.requests[n]!.json);
      assert.ok(!body.includes("remember this"), "cleared context must not reach the provider");
      assert.deepEqual(c.seqErrors, []);
      c.end();
      await c.closed;
    });

    it("base_url overrides the provider endpoint for this session only", async () => {
      const other = await startFakeProvider();
      try {
        const c = await suite.t.open();
        const s = await c.open({ base_url: `${other.baseUrl}/v1`, channel: "x".repeat(32) });
        const r = await c.turn(s.session_id as string, "elsewhere");
        assert.equal(r.terminal.type, "turn.completed");
        assert.equal(other.requests.length, 1);
        c.end();
        await c.closed;
        // Before: accepted, then session.started said `model: null` and every turn failed "no usable provider and
        // model are selected; choose one in settings".
        for (const bad of ["http://x\u0000y", `${other.baseUrl}/v1\u0007`, "http://[::1", "http://x:99999", "ftp://x"]) {
          const b = await suite.t.open();
          await b.initialize();
          const r = await b.reply(b.request({ type: "session.start", cwd: "/", base_url: bad }), ["session.started"]);
          assert.deepEqual([r.code, r.message], ["invalid_request", "`base_url` must be an http(s) URL"], JSON.stringify(bad));
          b.end();
          await b.closed;
        }
      } finally {
        await other.close();
      }
    });

    it("a provider named alone brings its own model and its metadata, not the settings' model of another provider; an unset key variable is named", async () => {
      const other = await startFakeProvider();
      const path = join(suite.rig.home, "settings.json");
      const original = readFileSync(path, "utf8");
      const settings = JSON.parse(original) as Msg;
      settings.providers.second = { api: "openai-chat", base_url: `${other.baseUrl}/v1`, auth: "none", models: [{ id: "second-model", context_window: 64_000 }] };
      // BERTH_* variables never reach the server (childEnv), so this one is unset there.
      settings.providers.keyed = { api: "openai-chat", base_url: `${other.baseUrl}/v1`, api_key_env: "BERTH_TEST_UNSET_KEY", models: [{ id: "k1" }] };
      // A key pasted where the variable's name belongs: never echoed back.
      settings.providers.pasted = { api: "openai-chat", base_url: `${other.baseUrl}/v1`, api_key_env: "sk-proj-0123456789abcdefPASTEDKEY", models: [{ id: "p1" }] };
      writeFileSync(path, JSON.stringify(settings));
      try {
        const c = await suite.t.open();
        const s = await c.open({ provider: "second" });
        assert.equal(s.model, "second-model");
        assert.equal(s.context_max_tokens, 64_000);
        const r = await c.turn(s.session_id as string, "which model?");
        assert.equal(r.terminal.type, "turn.completed");
        assert.equal((other.requests[0]!.json as Msg).model, "second-model");
        // Named with its model, the session's model wins; the settings' own provider keeps its model.
        const c2 = await suite.t.open();
        const s2 = await c2.open({ provider: "second", model: "second-large" });
        assert.equal(s2.model, "second-large");
        const c3 = await suite.t.open();
        const s3 = await c3.open({ provider: "fake" });
        assert.equal(s3.model, "fake-model");
        // A provider whose key variable is unset: the turn names the variable and the fix, and sends nothing.
        const c4 = await suite.t.open();
        const s4 = await c4.open({ provider: "keyed" });
        assert.equal(s4.model, "k1");
        const sent = other.requests.length;
        const f = await c4.turn(s4.session_id as string, "no key");
        assert.equal(f.terminal.type, "turn.failed");
        assert.equal(
          f.terminal.message,
          "the provider credential is missing: BERTH_TEST_UNSET_KEY (the provider's api_key_env in settings.json) is not set in the environment of the process running this session; set it and restart that process",
        );
        assert.equal(other.requests.length, sent);
        const c5 = await suite.t.open();
        const s5 = await c5.open({ provider: "pasted" });
        const g = await c5.turn(s5.session_id as string, "pasted key");
        assert.equal(g.terminal.type, "turn.failed");
        assert.match(g.terminal.message as string, /^the provider credential is missing or was rejected: provider credential unavailable; /);
        assert.ok(!JSON.stringify(c5.frames).includes("PASTEDKEY"), "a key in api_key_env never reaches the client");
        assert.equal(other.requests.length, sent);
        for (const x of [c, c2, c3, c4, c5]) {
          x.end();
          await x.closed;
        }
      } finally {
        writeFileSync(path, original);
        await other.close();
      }
    });

    it("no_tools sends no tools; channel adds the chat section; model overrides apply to this session only", async () => {
      const c = await suite.t.open();
      const s = await c.open({ no_tools: true, channel: "WeChat", model: "other-model" });
      assert.equal(s.model, "other-model");
      const n = suite.rig.fake.requests.length;
      await c.turn(s.session_id as string, "hi");
      const req = suite.rig.fake.requests[n]!.json as Msg;
      assert.equal(req.model, "other-model");
      assert.ok(req.tools === undefined || (Array.isArray(req.tools) && req.tools.length === 0));
      assert.match(JSON.stringify(req.messages), /WeChat/);
      const c2 = await suite.t.open();
      const s2 = await c2.open();
      const n2 = suite.rig.fake.requests.length;
      await c2.turn(s2.session_id as string, "hi");
      const req2 = suite.rig.fake.requests[n2]!.json as Msg;
      assert.equal(req2.model, "fake-model");
      assert.ok(Array.isArray(req2.tools) && req2.tools.length > 0);
      for (const x of [c, c2]) {
        x.end();
        await x.closed;
      }
    });

    it("reports compaction as context.compacted and a provider failure as turn.failed provider_error", async () => {
      const f = await suite.t.open();
      const fs = await f.open();
      suite.rig.fake.script([{ status: 400 }]); // not retried (a 5xx would be)
      const failed = await f.turn(fs.session_id as string, "fail please");
      assert.equal(failed.terminal.type, "turn.failed");
      assert.equal(failed.terminal.code, "provider_error");
      // The status and the error body's category reach the client; the body's message never does.
      assert.equal(failed.terminal.message, "the provider request failed: provider returned an error status (HTTP 400 fake_error)");
      assert.ok(!JSON.stringify(f.frames).includes("SECRET-ERROR-BODY-MARKER"), "provider error bodies never reach the wire");
      f.end();
      await f.closed;
      const path = join(suite.rig.home, "settings.json");
      const original = readFileSync(path, "utf8");
      const small = JSON.parse(original) as Msg;
      small.providers.fake.models[0].context_window = 4000;
      writeFileSync(path, JSON.stringify(small));
      try {
        const c = await suite.t.open();
        const s = await c.open();
        const sid = s.session_id as string;
        await c.turn(sid, "first " + "lorem ipsum ".repeat(400));
        const second = await c.turn(sid, "second " + "lorem ipsum ".repeat(400));
        assert.equal(second.terminal.type, "turn.completed");
        const compacted = second.frames.find((m) => m.type === "context.compacted")!;
        assert.ok(compacted, "the second turn compacts");
        assert.ok((compacted.before_tokens as number) > (compacted.after_tokens as number));
        assert.equal(typeof compacted.removed_messages, "number");
        assert.ok(second.frames.indexOf(compacted) < second.frames.findIndex((m) => m.type === "assistant.delta"));
        assert.deepEqual(c.seqErrors, []);
        c.end();
        await c.closed;
      } finally {
        writeFileSync(path, original);
      }
    });

    it("a settings file that cannot be used fails the turn with a message naming which file, what is wrong and the fix", async () => {
      const path = join(suite.rig.home, "settings.json");
      const original = readFileSync(path, "utf8");
      try {
        writeFileSync(path, original.slice(0, original.length - 1)); // the closing brace lost
        const c = await suite.t.open();
        const s = await c.open();
        const broken = await c.turn(s.session_id as string, "hello");
        assert.equal(broken.terminal.type, "turn.failed");
        assert.equal(broken.terminal.code, "provider_error");
        assert.equal(
          broken.terminal.message,
          "the global settings file (settings.json in the Berth home, $MC_HOME) is not valid JSON; fix or remove it (`berth chat` shows the line and column)",
        );
        assert.ok(!JSON.stringify(c.frames).includes(suite.rig.home), "no path of the home reaches the client");
        c.end();
        await c.closed;
        writeFileSync(path, JSON.stringify({ ...(JSON.parse(original) as Msg), providers: 5 }));
        const d = await suite.t.open();
        const p = await d.open();
        const wrong = await d.turn(p.session_id as string, "hello");
        assert.equal(wrong.terminal.type, "turn.failed");
        assert.equal(
          wrong.terminal.message,
          "the global settings file (settings.json in the Berth home, $MC_HOME) has a setting of the wrong shape at $.providers; fix or remove it (`berth chat` says what it must be)",
        );
        d.end();
        await d.closed;
        // Nesting 5,000 levels deep is valid JSON: the cause named is the depth, with the bound and the fix.
        writeFileSync(path, `${original.trimEnd().slice(0, -1)}, "deep": ${"[".repeat(4999)}${"]".repeat(4999)}}`);
        const e = await suite.t.open();
        const q = await e.open();
        const deep = await e.turn(q.session_id as string, "hello");
        assert.equal(
          deep.terminal.message,
          "the global settings file (settings.json in the Berth home, $MC_HOME) nests values deeper than settings may (64 levels of objects and arrays); flatten it or remove the deep value",
        );
        e.end();
        await e.closed;
      } finally {
        writeFileSync(path, original);
      }
    });

    it("an SCV session is an ordinary durable session: the app-service lists it", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      await c.turn(s.session_id as string, "durable prompt");
      c.end();
      await c.closed;
      const svc = new ServiceProcess({ home: suite.rig.home });
      await svc.initialize();
      const list = await svc.request("session.list", {});
      svc.end();
      await svc.exited;
      const ids = (list.payload.sessions as Msg[]).map((x) => x.session_id as string);
      assert.ok(ids.includes(s.session_id as string), `${s.session_id} in ${ids.join(",")}`);
    });
  });
}
