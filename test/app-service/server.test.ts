/**
 * The dispatcher in-process over stream pairs, with small test families standing in for later method families.
 * Covers reservation and ordering rules that the foundation's own methods cannot reach from the wire.
 */
import { once } from "node:events";
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { PassThrough, Writable } from "node:stream";
import { AppServiceServer } from "../../src/protocols/app-service/server.js";
import { serviceMethods } from "../../src/protocols/app-service/service-methods.js";
import { serverWithServiceMethods } from "../helpers/app-service-server.js";
import type { LazyFamily, MethodFamily, RequestContext, Reservation } from "../../src/protocols/app-service/descriptor.js";

function harness(extra: Array<MethodFamily | LazyFamily>) {
  const input = new PassThrough();
  const lines: string[] = [];
  let buf = "";
  const output = new Writable({
    write(chunk: Buffer, _e, cb) {
      buf += chunk.toString("utf8");
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
      cb();
    },
  });
  const logs: string[] = [];
  const state = { initialized: false };
  const server = new AppServiceServer({
    input,
    output,
    state,
    log: (l) => logs.push(l),
    families: [serviceMethods({ info: { serverName: "berth", serverVersion: "0.0.0", transports: ["stdio"] }, state, providerAuthReady: () => Promise.resolve(false) }), ...extra],
  });
  const done = server.run();
  const send = (o: unknown) => input.write(JSON.stringify(o) + "\n");
  const req = (id: unknown, method: string, payload: unknown = {}, more: Record<string, unknown> = {}) =>
    send({ protocol_version: 1, kind: "request", request_id: id, method, payload, ...more });
  const until = async (pred: () => boolean) => {
    for (let i = 0; i < 1000 && !pred(); i++) await new Promise((r) => setImmediate(r));
    assert.ok(pred(), "condition not reached");
  };
  const parsed = () => lines.map((l) => JSON.parse(l) as Record<string, any>);
  req("init", "initialize", { supported_protocol_versions: [1] });
  return { input, lines, parsed, logs, done, send, req, until };
}

describe("app-service dispatcher", () => {
  it("keeps a held request ID reserved past its response until release (duplicate_request_id) @req AS-DUP-01", async () => {
    let reservation: Reservation | undefined;
    const h = harness([
      {
        descriptors: [
          {
            method: "turn.start",
            sessionId: "optional",
            parse: (p) => ({ ok: true, value: p }),
            handle: (ctx) => {
              reservation = ctx.hold();
              return { payload: { status: "accepted" } };
            },
          },
        ],
      },
    ]);
    h.req("t1", "turn.start", {});
    await h.until(() => h.lines.length >= 2);
    h.req("t1", "status", {});
    h.req("t1", "turn.start", {}, { session_id: "s9", extra: true }); // malformed and duplicate: duplicate wins
    await h.until(() => h.lines.length >= 4);
    const [, , dup1, dup2] = h.parsed();
    assert.deepEqual(dup1!.error.code, "duplicate_request_id");
    assert.equal(dup1!.request_id, "t1");
    assert.equal(dup1!.method, "status");
    assert.equal(dup2!.error.code, "duplicate_request_id", "@req AS-DUP-02 duplicate precedes decoder errors");
    assert.equal(dup2!.session_id, "s9", "independently safe identities are preserved");
    assert.equal(dup2!.method, "turn.start");
    reservation!.release();
    h.req("t1", "status", {});
    await h.until(() => h.lines.length >= 5);
    assert.equal(h.parsed()[4]!.error, null, "released ID is usable again");
    h.input.end();
    assert.equal(await h.done, 0);
  });

  it("answers a fresh safe ID on a malformed record with its decoder error and echoes it @req AS-DUP-04", async () => {
    const h = harness([]);
    h.req("fresh", "status", { x: 1 });
    h.req("fresh", "status", {});
    await h.until(() => h.lines.length >= 3);
    const [, a, b] = h.parsed();
    assert.equal(a!.error.code, "invalid_payload");
    assert.equal(a!.request_id, "fresh");
    assert.equal(b!.error, null, "the decoder-error reservation ended with its response");
    h.input.end();
    await h.done;
  });

  it("writes events emitted before the response right after it, in order", async () => {
    const h = harness([
      {
        descriptors: [
          {
            method: "turn.start",
            sessionId: "optional",
            parse: (p) => ({ ok: true, value: p }),
            handle: (ctx) => {
              const r = ctx.hold();
              void ctx.emit("turn.started", "s1", { n: 0 });
              void ctx.emit("turn.assistant_delta", "s1", { n: 1 });
              setImmediate(() => {
                void ctx.emit("turn.terminal", "s1", { n: 2 });
                r.release();
              });
              return { payload: { status: "accepted" }, sessionId: "s1" };
            },
          },
        ],
      },
    ]);
    h.req("t", "turn.start", {});
    await h.until(() => h.lines.length >= 5);
    const out = h.parsed().slice(1);
    assert.deepEqual(out.map((m) => m.kind + ":" + (m.event ?? m.method)), ["response:turn.start", "event:turn.started", "event:turn.assistant_delta", "event:turn.terminal"]);
    assert.deepEqual(out.map((m) => m.request_id), ["t", "t", "t", "t"]);
    assert.equal(out[0]!.session_id, "s1");
    assert.equal(new Set(out.slice(1).map((m) => m.event_id)).size, 3, "event IDs are distinct");
    h.input.end();
    await h.done;
  });

  it("writes each record's batch before the next record is processed @req AS-FRAME-13", async () => {
    const seen: number[] = [];
    const h: ReturnType<typeof harness> = harness([
      {
        descriptors: [
          {
            method: "session.list",
            sessionId: "forbidden",
            parse: (p) => ({ ok: true, value: p }),
            handle: async () => {
              await new Promise((r) => setImmediate(r));
              seen.push(h.lines.length);
              return { payload: {} };
            },
          },
        ],
      },
    ]);
    for (let i = 0; i < 20; i++) h.req(`l${i}`, "session.list", {});
    await h.until(() => h.lines.length >= 21);
    // When record i is handled, the init response and all i earlier responses are already written.
    assert.deepEqual(seen, Array.from({ length: 20 }, (_, i) => i + 1));
    h.input.end();
    await h.done;
  });

  it("stops with a diagnostic and no replacement message when an outbound message is oversize @req AS-FRAME-11", async () => {
    const h = harness([
      {
        descriptors: [
          {
            method: "session.list",
            sessionId: "forbidden",
            parse: (p) => ({ ok: true, value: p }),
            handle: () => ({ payload: { big: "x".repeat(40_000) } }),
          },
        ],
      },
    ]);
    h.req("big", "session.list", {});
    h.req("after", "status", {});
    assert.equal(await h.done, 1);
    assert.equal(h.lines.length, 1, "only the initialize response was written");
    assert.ok(h.logs.some((l) => /outbound payload exceeds/.test(l)));
  });

  it("turns a throwing handler into internal_error and keeps going", async () => {
    const h = harness([
      {
        descriptors: [
          {
            method: "session.list",
            sessionId: "forbidden",
            parse: (p) => ({ ok: true, value: p }),
            handle: () => {
              throw new Error("boom /secret/path");
            },
          },
        ],
      },
    ]);
    h.req("x", "session.list", {});
    h.req("y", "status", {});
    await h.until(() => h.lines.length >= 3);
    const [, x, y] = h.parsed();
    assert.equal(x!.error.code, "internal_error");
    assert.ok(!JSON.stringify(x).includes("secret"));
    assert.equal(y!.error, null);
    assert.ok(!h.logs.join("\n").includes("secret"));
    h.input.end();
    assert.equal(await h.done, 0);
  });

  it("waits for worker-mode handlers at EOF and writes their responses", async () => {
    let release!: () => void;
    const h = harness([
      {
        descriptors: [
          {
            method: "catalog.refresh",
            sessionId: "forbidden",
            mode: "worker",
            parse: (p) => ({ ok: true, value: p }),
            handle: () => new Promise((r) => (release = () => r({ payload: { state: "fresh_cache" } }))),
          },
        ],
      },
    ]);
    h.req("w", "catalog.refresh", {});
    h.req("s", "status", {});
    await h.until(() => h.lines.length >= 2);
    assert.equal(h.parsed()[1]!.request_id, "s", "other requests are answered while the worker runs");
    h.input.end();
    await once(h.input, "end"); // the server has read EOF while the worker still runs
    release();
    assert.equal(await h.done, 0);
    assert.equal(h.parsed()[2]!.request_id, "w");
  });

  /** A lazy sessions family (session.create answers at once) and a `session`-prefetched turn family, with a log. */
  const prefetchFamilies = (log: string[]): LazyFamily[] => [
    {
      methods: ["session.create"],
      load: () =>
        Promise.resolve({
          descriptors: [
            {
              method: "session.create",
              sessionId: "forbidden",
              parse: (p: Record<string, unknown>) => ({ ok: true as const, value: p }),
              handle: () => {
                log.push("session.create handled");
                return { payload: { session_id: "s1" }, sessionId: "s1" };
              },
            },
          ],
        }),
    },
    {
      methods: ["turn.start"],
      prefetch: "session",
      load: () => {
        log.push("turn family loaded");
        return Promise.resolve({
          descriptors: [{ method: "turn.start", sessionId: "required", parse: (p: Record<string, unknown>) => ({ ok: true as const, value: p }), handle: () => ({ payload: { status: "accepted" } }) }],
        });
      },
    },
  ];

  it("prefetches a `session` family once the first session request has started, and a prompt sent then is served", async () => {
    const log: string[] = [];
    const h = harness(prefetchFamilies(log));
    h.req("s", "session.create", {});
    await h.until(() => log.includes("turn family loaded"));
    assert.deepEqual(log, ["session.create handled", "turn family loaded"], "loaded after the session request ran, without a call to it");
    h.req("t", "turn.start", {}, { session_id: "s1" });
    await h.until(() => h.parsed().some((m) => m.request_id === "t"));
    assert.deepEqual(h.parsed().find((m) => m.request_id === "t")?.payload, { status: "accepted" });
    h.input.end();
    await h.done;
  });

  it("prefetches a `session` family when the input goes quiet without a session", async () => {
    const log: string[] = [];
    const h = harness(prefetchFamilies(log));
    // No session request: the family loads once no request has arrived for a while (awaited, not timed).
    for (let i = 0; i < 800 && !log.includes("turn family loaded"); i++) await new Promise((r) => setTimeout(r, 25));
    assert.deepEqual(log, ["turn family loaded"]);
    h.input.end();
    await h.done;
  });

  it("writes a turn's terminal event at once, behind every event queued before it", async () => {
    const { input, writes, ctx, done } = await heldTurn();
    // The turn's last chunk and its end in one go: the runtime's after-turn work (the provider's next connection) is
    // queued for the next check phase, where the terminal would otherwise wait behind it.
    for (let i = 1; i <= 5; i++) void ctx().emit("turn.assistant_delta", null, { turn_id: "x", sequence: i, text: `d${i}` });
    void ctx().emit("turn.terminal", null, { turn_id: "x", status: "completed", sequence: 6 });
    const lines = writes.join("").split("\n").filter((l) => l.includes('"kind":"event"'));
    assert.deepEqual(
      lines.map((l) => (JSON.parse(l) as { event: string; payload: { sequence: number } }).payload.sequence),
      [1, 2, 3, 4, 5, 6],
      "the terminal and every delta before it were written before the emit returned, in order",
    );
    assert.match(lines[5]!, /"event":"turn.terminal"/);
    input.end();
    await done;
  });

  it("writes a turn's first delta at once, not after the rest of the provider chunk it came in", async () => {
    const { input, writes, ctx, until, done } = await heldTurn();
    // One provider chunk decoded in one go: its deltas are emitted back to back, without yielding.
    for (let i = 1; i <= 50; i++) void ctx().emit("turn.assistant_delta", null, { turn_id: "x", sequence: i, text: `d${i}` });
    const first = writes.find((w) => w.includes('"event":"turn.assistant_delta"'));
    assert.ok(first !== undefined, "the first delta was written before the chunk's other deltas were queued");
    assert.match(first, /"text":"d1"/);
    assert.doesNotMatch(first, /"text":"d2"/);
    await until(() => writes.join("").includes('"text":"d50"'));
    const all = writes.join("").split("\n").filter((l) => l.includes(`"event":"turn.assistant_delta"`));
    assert.deepEqual(
      all.map((l) => (JSON.parse(l) as { payload: { text: string } }).payload.text),
      Array.from({ length: 50 }, (_, i) => `d${i + 1}`),
      "every delta, in order",
    );
    input.end();
    await done;
  });
});

/**
 * A server with the service methods and a `turn.start` that holds its request open, initialized and with that turn
 * accepted: `ctx()` is the held turn's context, so a test emits its events and looks at what was written, chunk by chunk.
 */
async function heldTurn(): Promise<{ input: PassThrough; writes: string[]; ctx: () => RequestContext; until: (pred: () => boolean) => Promise<void>; done: Promise<number> }> {
  const input = new PassThrough();
  const writes: string[] = [];
  const output = new Writable({
    write(chunk: Buffer, _e, cb) {
      writes.push(chunk.toString("utf8"));
      cb();
    },
  });
  let ctx: RequestContext | undefined;
  const server = serverWithServiceMethods(input, output, [
    {
      descriptors: [
        {
          method: "turn.start",
          sessionId: "optional",
          parse: (p) => ({ ok: true, value: p }),
          handle: (c) => {
            ctx = c;
            c.hold();
            return { payload: { status: "accepted" } };
          },
        },
      ],
    },
  ]);
  const done = server.run();
  const req = (id: string, method: string, payload: unknown) => input.write(JSON.stringify({ protocol_version: 1, kind: "request", request_id: id, method, payload }) + "\n");
  const until = async (pred: () => boolean) => {
    for (let i = 0; i < 1000 && !pred(); i++) await new Promise((r) => setImmediate(r));
    assert.ok(pred(), "condition not reached");
  };
  req("i", "initialize", { supported_protocol_versions: [1] });
  req("t", "turn.start", {});
  await until(() => writes.join("").includes('"request_id":"t","session_id":null,"method":"turn.start"'));
  return { input, writes, ctx: () => ctx!, until, done };
}
