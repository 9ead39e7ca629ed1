/**
 * App-service lifecycle rules through the spawned service (issue 20 §1, §2, §3, §7): a broken stdout, repeated
 * initialization, read-only status routes, and session_busy / admission-bound conflicts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { AuthStore } from "../../src/store/auth/auth-store.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { parsed, startRig, startTurn, waitTerminal, type Msg } from "../turns/helpers.js";
import { startLogin, waitFor } from "../auth-wire/wire-helpers.js";

async function until<T>(what: string, f: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const req = (requestId: string, method: string, payload: unknown, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ protocol_version: 1, kind: "request", request_id: requestId, method, payload, ...extra }) + "\n";

describe("lifecycle rules", { concurrency: 2 }, () => {
  it("a broken stdout cancels and drains the turn, then releases the attachment; exit 1 @req AS-OUT-01", async () => {
    const rig = await startRig();
    try {
      const sid = (await rig.svc.request("session.create", {})).payload.session_id as string;
      rig.fake.script([{ steps: [{ text: "partial answer" }, { waitForAbort: true }] }]);
      await startTurn(rig.svc, "hello", "t1", sid);
      await until("delta", () => parsed(rig.svc).some((m) => m.event === "turn.assistant_delta"));
      // The reader goes away; the next write (the status response) fails.
      rig.svc.child.stdout.destroy();
      rig.svc.send({ protocol_version: 1, kind: "request", request_id: "s", method: "status", payload: {} });
      const { code } = await rig.svc.exited;
      assert.equal(code, 1);
      await rig.fake.requests[0]!.socketClosed; // the provider stream was cancelled
      assert.match(rig.svc.stderr, /output/i);
      // Drained before release: the cancelled terminal with its partial text is durable, and the lease is free.
      const next = new ServiceProcess({ home: rig.svc.home });
      try {
        await next.initialize();
        const open = await next.request("session.open", {}, { session_id: sid });
        assert.equal(open.error, null, "the attachment was released");
        const replay = await next.request("session.replay", {}, { session_id: sid });
        assert.deepEqual(
          replay.payload.events.map((e: Msg) => [e.kind, e.role ?? e.status, e.text ?? null]),
          [
            ["message", "user", "hello"],
            ["message", "assistant", "partial answer"],
            ["terminal", "cancelled", null],
          ],
        );
      } finally {
        next.end();
        await next.exited;
      }
    } finally {
      await rig.fake.close();
    }
  });

  it("initialize again during a live turn, login and attachment resets none of them @req AS-INIT-REPEAT-01", async () => {
    const issuer = await FakeOAuthIssuer.start();
    const rig = await startRig({ svc: { env: { BERTH_OPENAI_AUTH_ISSUER: issuer.url, BERTH_OPENAI_AUTH_CALLBACK_PORT: "0" } } });
    try {
      const svc = rig.svc;
      const sid = (await svc.request("session.create", {})).payload.session_id as string;
      const { loginId } = await startLogin(svc, "login");
      rig.fake.script([{ steps: [{ text: "working" }, { waitForAbort: true }] }]);
      const turn = await startTurn(svc, "long", "t1");
      await until("delta", () => parsed(svc).some((m) => m.request_id === "t1" && m.event === "turn.assistant_delta"));
      const again = await svc.request("initialize", { supported_protocol_versions: [1] });
      assert.equal(again.error, null);
      // A failed renegotiation does not revoke anything either.
      assert.equal((await svc.request("initialize", { supported_protocol_versions: [2] })).error.code, "unsupported_version");
      // The reservations survive: both start IDs are still reserved.
      assert.equal((await svc.request("status", {}, {}, "t1")).error.code, "duplicate_request_id");
      assert.equal((await svc.request("status", {}, {}, "login")).error.code, "duplicate_request_id");
      // The attachment survives: another process cannot take the session.
      const other = new ServiceProcess({ home: svc.home });
      try {
        await other.initialize();
        assert.equal((await other.request("session.open", {}, { session_id: sid })).error.code, "session_busy");
      } finally {
        other.end();
        await other.exited;
      }
      // The login and the turn are still live: cancelling each ends it with its one terminal.
      const from = svc.lines.length;
      assert.equal((await svc.request("auth.login.cancel", { login_id: loginId })).payload.status, "cancellation_requested");
      const lt = await waitFor(svc, (m) => m.event === "auth.login.terminal", from);
      assert.equal(lt.payload.state, "cancelled");
      assert.equal((await svc.request("turn.cancel", { turn_id: turn.payload.turn_id })).payload.status, "cancellation_requested");
      const ev = await waitTerminal(svc, "t1");
      assert.equal(ev.at(-1)!.payload.status, "cancelled");
      assert.equal(ev.at(-1)!.payload.assistant_text, "working");
      assert.deepEqual((await svc.request("session.close", {}, { session_id: sid })).payload, { session_id: sid, status: "closed" });
    } finally {
      await rig.close();
      await issuer.close();
    }
  });

  it("status and auth.status never refresh, mutate auth or touch the network @req AS-STATUS-RO-01", async () => {
    const issuer = await FakeOAuthIssuer.start();
    const rig = await startRig({ svc: { env: { BERTH_OPENAI_AUTH_ISSUER: issuer.url, MC_PROVIDER: "openai-codex", MC_MODEL: "gpt-5-codex" } } });
    try {
      const store = new AuthStore(rig.svc.home);
      const gen = (await store.read()).generation("openai-codex");
      assert.equal(
        await store.commitOAuth("openai-codex", gen, { type: "oauth", access: "a-SECRETMARKER", refresh: issuer.mintRefreshToken(), expires_at: Date.now() - 60_000, account_id: "acct" }),
        "committed",
      );
      const authFile = join(rig.svc.home, "auth.json");
      const before = { text: readFileSync(authFile, "utf8"), mtime: statSync(authFile).mtimeMs };
      for (let i = 0; i < 3; i++) {
        const st = await rig.svc.request("status", {});
        assert.equal(st.payload.provider_auth_ready, true, "an expired but refreshable credential is ready");
        const as = await rig.svc.request("auth.status", {});
        const codex = as.payload.providers.find((p: Msg) => p.provider_id === "openai-codex");
        assert.deepEqual([codex.readiness, codex.ready], ["ready", true]);
      }
      assert.deepEqual(issuer.calls, [], "the issuer saw no request");
      assert.equal(readFileSync(authFile, "utf8"), before.text, "auth storage unchanged");
      assert.equal(statSync(authFile).mtimeMs, before.mtime);
      assert.equal(rig.fake.requests.length, 0, "no provider request");
    } finally {
      await rig.close();
      await issuer.close();
    }
  });

  it("session_busy: a second service's turn on a held session, a turn on a closing attachment @req AS-BUSY-01 @req AS-BUSY-02", async () => {
    const rig = await startRig();
    try {
      const svc = rig.svc;
      const sid = (await svc.request("session.create", {})).payload.session_id as string;
      const other = new ServiceProcess({ home: svc.home, cwd: svc.cwd! });
      try {
        await other.initialize();
        const r = await other.request("turn.start", { prompt: "mine" }, { session_id: sid }, "x1");
        assert.deepEqual([r.payload, r.error?.code], [null, "session_busy"]);
        assert.equal(parsed(other).some((m) => m.kind === "event"), false, "no worker, no events");
      } finally {
        other.end();
        await other.exited;
      }
      // A turn whose tool ignores SIGTERM keeps the attachment closing for the kill grace; a turn.start
      // pipelined right behind the close meets the closing attachment.
      rig.fake.script([{ steps: [{ toolCall: { id: "b", name: "bash", arguments: { command: "trap '' TERM; echo ready; while :; do sleep 0.05; done" } } }] }]);
      await startTurn(svc, "hold", "t1", sid);
      await until("tool running", () => parsed(svc).some((m) => m.request_id === "t1" && m.event === "turn.activity" && m.payload.activity.kind === "tool" && m.payload.activity.status === "running"));
      const from = svc.lines.length;
      await svc.write(req("c1", "session.close", {}, { session_id: sid }) + req("t2", "turn.start", { prompt: "again" }, { session_id: sid }) + req("o1", "session.open", {}, { session_id: sid }));
      const closeRes = await waitFor(svc, (m) => m.kind === "response" && m.request_id === "c1", from);
      assert.equal(closeRes.payload.status, "closing");
      const t2 = await waitFor(svc, (m) => m.kind === "response" && m.request_id === "t2", from);
      assert.equal(t2.error.code, "session_busy");
      const o1 = await waitFor(svc, (m) => m.kind === "response" && m.request_id === "o1", from);
      assert.equal(o1.error.code, "session_busy");
      const ev = await waitTerminal(svc, "t1");
      assert.equal(ev.at(-1)!.payload.status, "cancelled");
      assert.equal(parsed(svc, from).some((m) => m.request_id === "t2" && m.kind === "event"), false);
      await until("closed", async () => (await svc.request("session.close", {}, { session_id: sid })).payload?.status === "closed");
    } finally {
      await rig.close();
    }
  });

  it("an existing session whose history exceeds the turn-admission window is refused @req AS-ADMIT-01", async () => {
    const rig = await startRig();
    try {
      // Over 2 MiB of history without a checkpoint: replay pages still work, turn admission does not.
      const store = new SessionStore({ home: rig.svc.home });
      const h = await store.create(rig.svc.cwd!);
      const big = "x".repeat(15_000);
      for (let i = 0; i < 150; i++) {
        await h.writer.append({ kind: "user", turn_id: `t${i}`, text: big });
        await h.writer.append({ kind: "terminal", turn_id: `t${i}`, status: "completed", assistant_text: big });
      }
      await h.release();
      const replay = await rig.svc.request("session.replay", {}, { session_id: h.id });
      assert.equal(replay.error, null, "replay reads the recent window");
      const r = await startTurn(rig.svc, "one more", "t", h.id);
      assert.deepEqual([r.payload, r.error?.code], [null, "session_unavailable"]);
      assert.equal(parsed(rig.svc).some((m) => m.request_id === "t" && m.kind === "event"), false);
      // The refused admission released its implicit attachment: another process can take the session.
      rig.svc.end();
      await rig.svc.exited;
      const next = new ServiceProcess({ home: rig.svc.home });
      try {
        await next.initialize();
        assert.equal((await next.request("session.open", {}, { session_id: h.id })).error, null);
      } finally {
        next.end();
        await next.exited;
      }
    } finally {
      await rig.close();
    }
  });
});
