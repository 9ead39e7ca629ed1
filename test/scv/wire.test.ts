/**
 * SCV v3 wire rules over both transports: handshake, error codes and their check order, framing limits (at and one
 * past 1 MiB, CRLF), unknown fields, fatal version mismatch, and daemon.control per transport.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MAX_CLIENT_FRAME_BYTES } from "../../src/protocols/scv/wire.js";
import { TRANSPORTS, type Msg } from "./client.js";
import { useRig } from "./rig.js";

/** A JSON message of exactly `bytes` bytes. */
function sized(bytes: number, base: Msg): string {
  const head = JSON.stringify({ ...base, pad: "" });
  return JSON.stringify({ ...base, pad: "a".repeat(bytes - head.length) });
}

for (const name of TRANSPORTS) {
  describe(`scv wire over ${name}`, () => {
    const suite = useRig(name);

    it("requires initialize first, answers it once, and refuses a second one", async () => {
      const c = await suite.t.open();
      c.send({ type: "session.start", request_id: "early", cwd: "/" });
      const e = await c.reply("early", []);
      assert.deepEqual(e, { type: "error", request_id: "early", code: "not_initialized", message: "send `initialize` first", fatal: false });
      const init = await c.initialize();
      assert.equal(init.type, "initialized");
      assert.equal(init.protocol_version, 3);
      assert.equal(typeof init.server.name, "string");
      const again = c.request({ type: "initialize", protocol_version: 3 });
      assert.equal((await c.reply(again, [])).code, "invalid_request");
      c.end();
      await c.closed;
    });

    it("maps bad messages to invalid_json / invalid_request and keeps going", async () => {
      const c = await suite.t.open();
      await c.initialize();
      const n = c.frames.length;
      c.send("not json\n");
      c.send("[1,2]\n");
      c.send({ type: "no.such.type", request_id: "u1" });
      c.send({ request_id: "u2" });
      c.send({ type: "turn.cancel" });
      c.send({ type: "session.start", request_id: "u3" });
      c.send({ type: "session.start", request_id: "u4", cwd: "/", channel: "x".repeat(33) });
      c.send({ type: "turn.start", request_id: "u5", session_id: "nope", prompt: "hi", extra_field: 1 });
      await c.waitFor((m) => m.request_id === "u5");
      const errs = c.frames.slice(n);
      assert.deepEqual(
        errs.map((m) => [m.type, m.request_id, m.code, m.fatal]),
        [
          ["error", undefined, "invalid_json", false],
          ["error", undefined, "invalid_json", false],
          ["error", "u1", "invalid_json", false],
          ["error", "u2", "invalid_json", false],
          ["error", undefined, "invalid_request", false],
          ["error", "u3", "invalid_request", false],
          ["error", "u4", "invalid_request", false],
          // unknown fields are ignored: the message got to the session check
          ["error", "u5", "session_not_found", false],
        ],
      );
      assert.ok(!("request_id" in errs[0]!));
      c.end();
      await c.closed;
    });

    it("refuses a lone surrogate escape anywhere in a message with invalid_json, accepts a pair, and goes on", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      // Before the fix: the prompt failed its turn with internal_error "the session could not be written to disk", and
      // queued, it was echoed back as a lone `\ud800` escape, which a strict (serde_json) client cannot parse.
      const lone = [
        `{"type":"turn.start","request_id":"s1","session_id":"${sid}","prompt":"x\\ud800y"}`,
        `{"type":"turn.start","request_id":"s2","session_id":"${sid}","prompt":"\\udc00"}`,
        `{"type":"turn.start","request_id":"s3","session_id":"${sid}","prompt":"a","attachments":[{"kind":"file","path":"/x","size":1,"name":"\\udbff"}]}`,
        `{"type":"session.pause","request_id":"s4","session_id":"${sid}","paused":true,"ignored":{"\\ud800":1}}`,
      ];
      for (const line of lone) c.send(line + "\n");
      for (const rid of ["s1", "s2", "s3", "s4"]) {
        const e = await c.reply(rid, ["turn.started", "queue.enqueued", "session.paused"]);
        assert.deepEqual(e, {
          type: "error",
          request_id: rid,
          code: "invalid_json",
          message: "message holds a lone surrogate escape (\\uD800-\\uDFFF without its pair); send well-formed Unicode text",
          fatal: false,
        });
      }
      // a surrogate pair is a character; an escaped backslash before "ud800" is plain text
      c.send(`{"type":"turn.start","request_id":"ok1","session_id":"${sid}","prompt":"\\ud83d\\ude00 \\\\ud800"}\n`);
      const done = await c.waitFor((m) => m.request_id === "ok1" && /^(turn\.(completed|failed|cancelled)|error)$/.test(m.type as string));
      assert.equal(done.type, "turn.completed");
      const text = c.frames.filter((m) => m.request_id === "ok1" && m.type === "assistant.completed").map((m) => m.content as string);
      assert.deepEqual(text, ["echo: 😀 \\ud800"]);
      assert.deepEqual(c.seqErrors, []);
      c.end();
      await c.closed;
    });

    it("accepts a frame of exactly 1 MiB (CRLF too), skips one a byte longer with invalid_request, and goes on", async () => {
      const c = await suite.t.open();
      await c.initialize();
      c.send(sized(MAX_CLIENT_FRAME_BYTES, { type: "bogus", request_id: "at" }) + "\r\n");
      const at = await c.reply("at", []);
      assert.equal(at.code, "invalid_json"); // framing accepted it; the unknown type was the refusal
      const from = c.frames.length;
      c.send(sized(MAX_CLIENT_FRAME_BYTES + 1, { type: "bogus", request_id: "over" }) + "\n");
      const id = c.request({ type: "daemon.control", command: { action: "status" } });
      await c.reply(id, ["daemon.status"]);
      const over = c.frames[from]!;
      assert.deepEqual([over.code, over.message], ["invalid_request", "client frame exceeds 1048576 bytes; the line was skipped: send each message as one line of at most 1048576 bytes, with prompts of at most 262144 bytes (attach larger text as a file)"]);
      assert.ok(!("request_id" in over));
      assert.ok(!c.frames.some((m) => m.request_id === "over"));
      c.end();
      await c.closed;
    });

    it("quotes an unknown type of 64 bytes whole and cuts a longer one to 64 bytes on a character boundary", async () => {
      const c = await suite.t.open();
      await c.initialize();
      const cases: Array<[string, string]> = [
        ["x".repeat(64), "x".repeat(64)],
        ["x".repeat(65), "x".repeat(64)],
        ["é".repeat(33), "é".repeat(32)],
        ["x" + "é".repeat(32), "x" + "é".repeat(31)],
      ];
      for (const [i, [type, quoted]] of cases.entries()) {
        c.send({ type, request_id: `q${i}` });
        const e = await c.reply(`q${i}`, []);
        assert.deepEqual([e.code, e.message, e.fatal], ["invalid_json", `unknown message type \`${quoted}\``, false]);
      }
      const id = c.request({ type: "daemon.control", command: { action: "status" } });
      assert.ok(["daemon.status", "error"].includes((await c.reply(id, ["daemon.status"])).type as string), "the connection goes on");
      c.end();
      await c.closed;
    });

    it("a protocol_version that is no version number is invalid_json, not fatal; the connection goes on", async () => {
      const c = await suite.t.open();
      for (const [rid, pv] of [["s", "3"], ["f", 3.5], ["n", -3], ["o", null]] as const) c.send({ type: "initialize", request_id: rid, protocol_version: pv });
      c.send({ type: "initialize", request_id: "m" });
      for (const rid of ["s", "f", "n", "o", "m"]) {
        const e = await c.reply(rid, []);
        assert.equal(e.code, "invalid_json", rid);
        assert.equal(e.fatal, false, rid);
        assert.equal(e.message, "`protocol_version` must be a non-negative integer (this server speaks version 3)");
      }
      await c.initialize();
      c.end();
      await c.closed;
    });

    it("ends the connection after a fatal version_mismatch", async () => {
      const c = await suite.t.open();
      c.send({ type: "initialize", request_id: "v2", protocol_version: 2 });
      c.send({ type: "initialize", request_id: "v3", protocol_version: 3 });
      await c.closed;
      const e = c.frames.find((m) => m.request_id === "v2")!;
      assert.equal(e.code, "version_mismatch");
      assert.equal(e.fatal, true);
      assert.ok(!c.frames.some((m) => m.request_id === "v3"));
    });

    it(name === "stdio" ? "answers daemon.control with unsupported" : "serves daemon.control status and reload and refuses unknown actions", async () => {
      const c = await suite.t.open();
      await c.initialize();
      const s = c.request({ type: "daemon.control", command: { action: "status" } });
      const r = await c.reply(s, ["daemon.status"]);
      if (name === "stdio") assert.equal(r.code, "unsupported");
      else {
        assert.equal(r.type, "daemon.status");
        assert.equal(typeof r.status.pid, "number");
        assert.deepEqual(r.status.components, []);
        assert.ok(!("session_id" in r) && !("seq" in r));
        const u = c.request({ type: "daemon.control", command: { action: "frobnicate" } });
        assert.equal((await c.reply(u, [])).code, "invalid_json");
        const k = c.request({ type: "daemon.control", command: { action: "reload" } });
        assert.equal((await c.reply(k, ["daemon.status"])).type, "daemon.status");
      }
      c.end();
      await c.closed;
      assert.deepEqual(c.garbage, []);
    });
  });
}
