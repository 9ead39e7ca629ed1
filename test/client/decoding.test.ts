/**
 * Consumer fixtures: synthetic server streams against the real client (§Evolution and consumer decoding — every row
 * of the §Unknown output fields and values examples table — plus preflight, correlation and ordering rules).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ConnectionClosedError, IncompatibleServiceError, ProtocolError, ServiceError } from "../../src/client/app-service/index.js";
import { initPayload, Synthetic, terminal } from "./synthetic.js";

const tick = () => new Promise<void>((r) => setImmediate(r));

async function statusWith(payload: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const s = new Synthetic();
  await s.init();
  const p = s.client.status();
  s.respond(await s.request(1), payload, extra);
  return { s, p };
}

describe("examples table: §Unknown output fields and values", () => {
  it("row 1: extra envelope member and bounded optional payload metadata are accepted", async () => {
    const { p } = await statusWith({ service: "ready", provider_auth_ready: true, future_meta: { a: [1, 2], b: "x" } }, { future_hint: true });
    assert.deepEqual(await p, { service: "ready", provider_auth_ready: true });
  });

  it("row 2: a new limit key is accepted and required known limits are still validated", async () => {
    const s = new Synthetic();
    const prof: any = await s.init(initPayload((p) => {
      p.limits.max_future_page_items = 16;
      p.capabilities.limits.max_future_page_items = 16;
    }));
    assert.equal(prof.limits.max_record_bytes, 65536);
    const s2 = new Synthetic();
    await assert.rejects(s2.init(initPayload((p) => {
      delete p.limits.max_catalog_page_items;
      delete p.capabilities.limits.max_catalog_page_items;
      p.limits.max_future_page_items = 16;
      p.capabilities.limits.max_future_page_items = 16;
    })), IncompatibleServiceError);
  });

  for (const bad of ["16", 0, -1, 2 ** 60, 1.5, null]) {
    it(`row 3: new limit ${JSON.stringify(bad)} is rejected and no mutation is sent`, async () => {
      const s = new Synthetic();
      await assert.rejects(s.init(initPayload((p) => {
        p.limits.max_future_page_items = bad;
        p.capabilities.limits.max_future_page_items = bad;
      })), IncompatibleServiceError);
      await assert.rejects(s.client.startTurn({ prompt: "hi" }), IncompatibleServiceError);
      await assert.rejects(s.client.createSession(), IncompatibleServiceError);
      await tick();
      assert.equal(s.requests.length, 1);
    });
  }

  it("row 4: optional metadata absent or bounded null is accepted", async () => {
    for (const extra of [{}, { future_meta: null }]) {
      const { p } = await statusWith({ service: "ready", provider_auth_ready: false, ...extra });
      assert.equal((await p).provider_auth_ready, false);
    }
  });

  for (const [label, edit] of [
    ["absent", (p: any) => delete p.provider_auth_ready],
    ["null", (p: any) => (p.provider_auth_ready = null)],
    ['"false"', (p: any) => (p.provider_auth_ready = "false")],
    ["0", (p: any) => (p.provider_auth_ready = 0)],
  ] as const) {
    it(`row 5: provider_auth_ready ${label} is rejected`, async () => {
      const payload: any = { service: "ready", provider_auth_ready: true };
      edit(payload);
      const { s, p } = await statusWith(payload);
      await assert.rejects(p, ProtocolError);
      assert.equal(s.failures.length, 1);
      await assert.rejects(s.client.status(), ProtocolError);
    });
  }

  for (const [label, edit] of [
    ["lacks assistant_text", (p: any) => delete p.assistant_text],
    ["lacks sequence", (p: any) => delete p.sequence],
    ["has an unknown status", (p: any) => (p.status = "partially_completed")],
    ["names another turn", (p: any) => (p.turn_id = "t-2")],
    ["names another session", (p: any) => (p.session_id = "s-2")],
    ["lacks activity_dropped", (p: any) => delete p.activity_dropped],
    ["lacks replay_required", (p: any) => delete p.replay_required],
    ["has a string sequence", (p: any) => (p.sequence = "1")],
  ] as const) {
    it(`row 6: a terminal that ${label} is rejected; the turn never settles as successful`, async () => {
      const s = new Synthetic();
      await s.init();
      const { turn, req } = await s.turn();
      s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: 1, text: "Hello" });
      s.event(req, "turn.terminal", "s-1", terminal(2, edit));
      await assert.rejects(turn.result, ProtocolError);
      const seen: string[] = [];
      await assert.rejects(async () => {
        for await (const u of turn) if (u.type === "delta") seen.push(u.text);
      }, ProtocolError);
      assert.deepEqual(seen, ["Hello"]);
    });
  }

  it("row 7: a sequence gap (2 -> 4) is accepted; the terminal's assistant_text is authoritative", async () => {
    const s = new Synthetic();
    await s.init();
    const { turn, req } = await s.turn();
    s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: 1, text: "Hel" });
    s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: 2, text: "lo" });
    s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: 4, text: " world" });
    s.event(req, "turn.terminal", "s-1", terminal(6, (p) => (p.activity_dropped = 2)));
    const seqs: number[] = [];
    for await (const u of turn) seqs.push(u.sequence);
    assert.deepEqual(seqs, [1, 2, 4]);
    const t = await turn.result;
    assert.equal(t.assistant_text, "Hello world");
    assert.equal(t.activity_dropped, 2);
  });

  for (const [label, seqs] of [
    ["duplicate", [1, 2, 2]],
    ["regressing", [1, 3, 2]],
    ["started again", [1, 0]],
  ] as const) {
    it(`row 7: a ${label} sequence is rejected`, async () => {
      const s = new Synthetic();
      await s.init();
      const { turn, req } = await s.turn();
      for (const q of seqs) s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: q, text: "x" });
      await assert.rejects(turn.result, ProtocolError);
    });
  }

  it("row 7: an event after the terminal is rejected", async () => {
    const s = new Synthetic();
    await s.init();
    const { turn, req } = await s.turn();
    s.event(req, "turn.terminal", "s-1", terminal(1));
    assert.equal((await turn.result).status, "completed");
    s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: 2, text: "late" });
    await tick();
    assert.ok(s.failures[0] instanceof ProtocolError);
  });

  it("row 8: an advertisement with an unknown event is rejected before any mutation, even with every operation", async () => {
    const s = new Synthetic();
    await assert.rejects(s.init(initPayload((p) => p.capabilities.events.push("turn.approval_requested"))), /unknown event/);
    await assert.rejects(s.client.openSession("s-1"), IncompatibleServiceError);
    await assert.rejects(s.client.listSessions(), IncompatibleServiceError);
    await tick();
    assert.equal(s.requests.length, 1);
  });

  for (const [label, value] of [
    ["an over-limit array", Array.from({ length: 65 }, () => 0)],
    ["an over-limit string", "x".repeat(16385)],
    ["excessive nesting", JSON.parse("[".repeat(40) + "]".repeat(40))],
  ] as const) {
    it(`row 9: an unknown field holding ${label} rejects the whole record`, async () => {
      const { s, p } = await statusWith({ service: "ready", provider_auth_ready: true, future: value });
      await assert.rejects(p, ProtocolError);
      assert.equal(s.failures.length, 1);
    });
  }
});

describe("preflight", () => {
  const cases: Array<[string, (p: any) => void]> = [
    ["a profile without turn.activity", (p) => (p.capabilities.events = p.capabilities.events.filter((e: string) => e !== "turn.activity"))],
    ["no stdio transport", (p) => (p.capabilities.transports = ["socket"])],
    ["protocol 1 not advertised", (p) => (p.capabilities.protocol_versions = [2])],
    ["a missing required operation", (p) => (p.capabilities.operations = p.capabilities.operations.filter((o: string) => o !== "turn.cancel"))],
    ["a record bound beyond the local one", (p) => (p.limits.max_record_bytes = p.capabilities.limits.max_record_bytes = 1 << 24)],
    ["inconsistent limit maps", (p) => (p.capabilities.limits.max_id_bytes = 64)],
    ["a missing activity object", (p) => delete p.capabilities.activity],
    ["activity.events false", (p) => (p.capabilities.activity.events = false)],
    ["activity flag as 0", (p) => (p.capabilities.activity.subagents = 0)],
    ["approvals advertised", (p) => (p.capabilities.activity.approvals = true)],
    ["a missing server_version", (p) => delete p.server_version],
    ["protocol_version 2 selected", (p) => (p.protocol_version = 2)],
  ];
  for (const [label, edit] of cases)
    it(`rejects ${label} locally and refuses every later call`, async () => {
      const s = new Synthetic();
      await assert.rejects(s.init(initPayload(edit)), IncompatibleServiceError);
      await assert.rejects(s.client.status(), IncompatibleServiceError);
      await tick();
      assert.equal(s.requests.length, 1);
    });

  it("sends one strict initialize with an empty requested list and nothing before its response", async () => {
    const s = new Synthetic();
    const p = s.client.initialize();
    const req = await s.request(0);
    assert.deepEqual(req.payload, { supported_protocol_versions: [1], requested_capabilities: [] });
    await assert.rejects(s.client.status(), /initialize the client first/);
    s.respond(req, initPayload((x) => {
      x.capabilities.operations.push("session.fork");
      x.capabilities.unknown_member = { nested: true };
    }));
    await p;
    assert.equal(s.requests.length, 1);
  });

  it("an initialize error response leaves the client refusing calls; a failed renegotiation revokes the profile", async () => {
    const s = new Synthetic();
    const p = s.client.initialize();
    s.respond(await s.request(0), null, {}, { code: "unsupported_version", message: "The protocol version is unsupported." });
    await assert.rejects(p, IncompatibleServiceError);
    await assert.rejects(s.client.status(), IncompatibleServiceError);
    await s.init();
    await s.init(initPayload((x) => (x.capabilities.transports = [])))?.catch(() => {});
    await assert.rejects(s.client.status(), IncompatibleServiceError);
  });
});

describe("correlation and framing", () => {
  it("an unknown error code is a generic failure, not a success; a known code is typed", async () => {
    const s = new Synthetic();
    await s.init();
    const p = s.client.status();
    s.respond(await s.request(1), null, {}, { code: "future_error", message: "Something." });
    const err = await p.then(() => assert.fail("resolved"), (e: unknown) => e);
    assert.ok(err instanceof ServiceError);
    assert.equal(err.known, false);
    const q = s.client.createSession();
    s.respond(await s.request(2), null, {}, { code: "session_busy", message: "The session is busy." });
    await assert.rejects(q, (e: unknown) => e instanceof ServiceError && e.known && e.code === "session_busy");
    assert.equal(s.failures.length, 0);
  });

  const bad: Array<[string, (s: Synthetic) => Promise<void> | void]> = [
    ["an unknown message kind", (s) => s.send({ protocol_version: 1, kind: "notification", payload: {} })],
    ["an unknown event", async (s) => {
      const { req } = await s.turn();
      s.event(req, "turn.approval_requested", "s-1", { turn_id: "t-1", sequence: 1 });
    }],
    ["a response to no pending request", (s) => s.send({ protocol_version: 1, kind: "response", request_id: "nope", session_id: null, method: "status", payload: {}, error: null })],
    ["an uncorrelated error", (s) => s.send({ protocol_version: 1, kind: "response", request_id: null, session_id: null, method: null, payload: null, error: { code: "invalid_json", message: "x" } })],
    ["an event for no turn", (s) => s.send({ protocol_version: 1, kind: "event", event_id: "e", request_id: "c9", session_id: "s-1", event: "turn.started", payload: {} })],
    ["payload and error both set", async (s) => {
      const p = s.client.status().catch(() => {});
      s.respond(await s.request(1), { service: "ready", provider_auth_ready: true }, {}, { code: "internal_error", message: "x" });
      await p;
    }],
    ["a response naming another method", async (s) => {
      const p = s.client.status().catch(() => {});
      s.respond(await s.request(1), { service: "ready", provider_auth_ready: true }, { method: "capabilities" });
      await p;
    }],
    ["a missing nullable envelope field", (s) => s.raw(JSON.stringify({ protocol_version: 1, kind: "response", request_id: "c1", method: "status", payload: {}, error: null }))],
    ["invalid JSON", (s) => s.raw("{not json")],
    ["a record over the record bound", (s) => s.raw("x".repeat(70000))],
    ["a turn event on another session", async (s) => {
      const { req } = await s.turn();
      s.event(req, "turn.assistant_delta", "s-2", { turn_id: "t-1", sequence: 1, text: "x" });
    }],
    ["an auth event on a turn", async (s) => {
      const { req } = await s.turn();
      s.event(req, "auth.login.terminal", null, { login_id: "l", provider_id: "openai-codex", state: "cancelled", cleanup_complete: true });
    }],
    ["an activity with an unknown transport", async (s) => {
      const { req } = await s.turn();
      s.event(req, "turn.activity", "s-1", { turn_id: "t-1", sequence: 1, activity: { activity_id: "a", kind: "tool", tool_id: "h", tool_name: null, server_id: null, transport: "grpc", status: "running", timed_out: null, details_omitted: true } });
    }],
    ["an activity with a null parent", async (s) => {
      const { req } = await s.turn();
      s.event(req, "turn.activity", "s-1", { turn_id: "t-1", sequence: 1, activity: { activity_id: "a", parent_activity_id: null, kind: "lifecycle", category: "tool", status: "running", details_omitted: true } });
    }],
    ["a tool activity with timed_out absent", async (s) => {
      const { req } = await s.turn();
      s.event(req, "turn.activity", "s-1", { turn_id: "t-1", sequence: 1, activity: { activity_id: "a", kind: "tool", tool_id: "h", tool_name: null, server_id: null, transport: "unknown", status: "running", details_omitted: true } });
    }],
  ];
  for (const [label, act] of bad)
    it(`fails the connection on ${label}: pending work rejects, nothing is resent`, async () => {
      const s = new Synthetic();
      await s.init();
      await act(s);
      await tick();
      await tick();
      assert.ok(s.failures[0] instanceof ProtocolError, label);
      const before = s.requests.length;
      await assert.rejects(s.client.status(), ProtocolError);
      assert.equal(s.requests.length, before);
    });

  it("accepts every activity kind, including tool transport 'unknown' and timed_out null", async () => {
    const s = new Synthetic();
    await s.init();
    const { turn, req } = await s.turn();
    const acts = [
      { activity_id: "a1", kind: "lifecycle", category: "subagent_task", status: "running", details_omitted: true, parent_activity_id: "a0" },
      { activity_id: "a1", kind: "lifecycle", category: "activity", status: "completed", details_omitted: true },
      { activity_id: "a2", kind: "tool", tool_id: "h", tool_name: "read", server_id: null, transport: "unknown", status: "completed", timed_out: null, details_omitted: true },
      { activity_id: "a3", kind: "reasoning_summary", text: "", redacted: false, truncated: true },
      { activity_id: "a4", kind: "context", current_tokens: 10, max_tokens: 100, reasoning_tokens: null, request_sequence: 1, source: "provider_exact" },
      { activity_id: "a5", kind: "usage", effective_input: 1, output: 2, cache_read: 0, cache_known: false, request_sequence: 1, final_usage: true, source: "subagent_aggregate" },
      { activity_id: "a6", kind: "compaction", status: "completed", current_tokens: 5, max_tokens: 100, replay_required: true, future: "ok" },
    ];
    acts.forEach((a, i) => s.event(req, "turn.activity", "s-1", { turn_id: "t-1", sequence: i + 1, activity: a }));
    s.event(req, "turn.terminal", "s-1", terminal(acts.length + 1));
    const kinds: string[] = [];
    for await (const u of turn) if (u.type === "activity") kinds.push(u.activity.kind);
    assert.deepEqual(kinds, ["lifecycle", "lifecycle", "tool", "reasoning_summary", "context", "usage", "compaction"]);
    assert.equal(s.failures.length, 0);
  });

  it("a stream that ends mid-turn rejects the turn with ConnectionClosedError, never a terminal", async () => {
    const s = new Synthetic();
    await s.init();
    const { turn, req } = await s.turn();
    s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: 1, text: "partial" });
    s.toClient.end();
    await assert.rejects(turn.result, ConnectionClosedError);
  });

  it("a turn started on a session must be accepted on that session", async () => {
    const s = new Synthetic();
    await s.init();
    const p = s.client.startTurn({ prompt: "hi", sessionId: "s-1" });
    s.respond(await s.request(1), { turn_id: "t-1", session_id: "s-2", status: "accepted" });
    await assert.rejects(p, ProtocolError);
  });

  it("login: progress with the authorization URL, identity checks, terminal with cleanup", async () => {
    const s = new Synthetic();
    await s.init();
    const p = s.client.startLogin("openai-codex");
    const req = await s.request(1);
    s.respond(req, { login_id: "l-1", provider_id: "openai-codex", status: "started" });
    s.event(req, "auth.login.progress", null, { login_id: "l-1", provider_id: "openai-codex", state: "authorization_url", url: "https://auth.example/authorize?x=1", open_browser: true });
    s.event(req, "auth.login.progress", null, { login_id: "l-1", provider_id: "openai-codex", state: "waiting" });
    const login = await p;
    const it0 = login[Symbol.asyncIterator]();
    assert.equal(((await it0.next()).value).url, "https://auth.example/authorize?x=1");
    const sub = login.submit("the-code");
    const cb = await s.request(2);
    assert.deepEqual(cb.payload, { login_id: "l-1", input: "the-code" });
    s.respond(cb, { status: "submitted" });
    await sub;
    s.event(req, "auth.login.terminal", null, { login_id: "l-1", provider_id: "openai-codex", state: "exchange_succeeded", cleanup_complete: true });
    assert.equal((await login.result).state, "exchange_succeeded");
    // A login terminal without cleanup, or with an unknown state, is rejected.
    const q = s.client.startLogin("openai-codex");
    const req2 = await s.request(3);
    s.respond(req2, { login_id: "l-2", provider_id: "openai-codex", status: "started" });
    const l2 = await q;
    s.event(req2, "auth.login.terminal", null, { login_id: "l-2", provider_id: "openai-codex", state: "revoked", cleanup_complete: true });
    await assert.rejects(l2.result, ProtocolError);
  });
});

describe("replay pages", () => {
  it("follows truncated pages, restarts after resync_required, passes gap through", async () => {
    const s = new Synthetic();
    await s.init();
    const msg = (c: string, text: string) => ({ cursor: c, kind: "message", role: "user", text, part: 0, last_part: true });
    const pages: any[] = [];
    const done = (async () => {
      for await (const p of s.client.replay("s-1", { after: "stale" })) pages.push(p);
    })();
    let r = await s.request(1);
    assert.equal(r.payload.after, "stale");
    s.respond(r, { events: [], next_cursor: "c0", snapshot_cursor: "c2", truncated: false, gap: false, resync_required: true });
    r = await s.request(2);
    assert.equal(r.payload.after, null);
    s.respond(r, { events: [msg("c1", "a")], next_cursor: "c1", snapshot_cursor: "c2", truncated: true, gap: true, resync_required: false });
    r = await s.request(3);
    assert.equal(r.payload.after, "c1");
    s.respond(r, { events: [{ cursor: "c2", kind: "terminal", status: "completed" }], next_cursor: "c2", snapshot_cursor: "c2", truncated: false, gap: false, resync_required: false });
    await done;
    assert.deepEqual(pages.map((p) => [p.resync_required, p.restarted, p.gap, p.events.length]), [[true, false, false, 0], [false, true, true, 1], [false, false, false, 1]]);
  });

  it("rejects a replay item with an unknown kind or a resync page with events", async () => {
    for (const payload of [
      { events: [{ cursor: "c1", kind: "tool_call", text: "x" }], next_cursor: "c1", snapshot_cursor: "c1", truncated: false, gap: false, resync_required: false },
      { events: [{ cursor: "c1", kind: "terminal", status: "completed" }], next_cursor: "c1", snapshot_cursor: "c1", truncated: false, gap: false, resync_required: true },
    ]) {
      const s = new Synthetic();
      await s.init();
      const p = s.client.replayPage("s-1");
      s.respond(await s.request(1), payload);
      await assert.rejects(p, ProtocolError);
    }
  });
});

describe("consumer backpressure", () => {
  it("stops reading while a turn's unread updates pile up, resumes as they are consumed, releases at terminal", async () => {
    const s = new Synthetic();
    await s.init();
    const { turn, req } = await s.turn();
    for (let i = 1; i <= 600; i++) s.event(req, "turn.assistant_delta", "s-1", { turn_id: "t-1", sequence: i, text: "x" });
    s.event(req, "turn.terminal", "s-1", terminal(601, (p) => (p.assistant_text = "x".repeat(600))));
    await tick();
    assert.equal(s.toClient.isPaused(), true);
    let n = 0;
    for await (const u of turn) if (u.type === "delta") n++;
    assert.equal(n, 600);
    assert.equal((await turn.result).assistant_text.length, 600);
    assert.equal(s.toClient.isPaused(), false);
  });
});
