/**
 * The end of `berth acp`'s input reaches the SDK only once the requests read before it are answered (input-end.ts),
 * within its bounds, driven through the real wire and the SDK's agent over in-memory streams with an injected clock:
 * `END_IDLE_MS` with nothing written (a wedged handler), `END_STALL_MS` with one write pending (stdout unread).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import { END_IDLE_MS, END_STALL_MS, type EndTimers } from "../../src/protocols/acp/input-end.js";
import { acpWire } from "../../src/protocols/acp/wire.js";

class FakeClock implements EndTimers {
  private now = 0;
  private next = 0;
  private readonly due = new Map<number, { at: number; fn: () => void }>();
  private armed: () => void = () => undefined;
  set = (fn: () => void, ms: number): unknown => {
    const id = ++this.next;
    this.due.set(id, { at: this.now + ms, fn });
    this.armed();
    return id;
  };
  clear = (h: unknown): void => void this.due.delete(h as number);
  get pending(): number {
    return this.due.size;
  }
  /** Resolves once a timer is armed. */
  async untilArmed(): Promise<void> {
    while (this.due.size === 0) await new Promise<void>((r) => (this.armed = r));
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [id, t] of [...this.due]) {
      if (t.at > this.now) continue;
      this.due.delete(id);
      t.fn();
    }
  }
}

/** Lets every stream hop already queued run (in-memory streams settle within a few turns of the event loop). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
};

interface Rig {
  clock: FakeClock;
  lines: Array<Record<string, unknown>>;
  send(message: Record<string, unknown>): Promise<void>;
  endInput(): Promise<void>;
  until(pred: () => boolean): Promise<void>;
  closed: () => boolean;
  c: { closed: Promise<void>; client: acp.AgentContext };
  /** Makes every later write to the output wait for ever (an editor that stops reading stdout). */
  stallOutput(): void;
  /** The wedged `session/new` handlers' answers, in arrival order. */
  answerNew: Array<() => void>;
}

function rig(): Rig {
  const clock = new FakeClock();
  const toAgent = new TransformStream<Uint8Array, Uint8Array>();
  const lines: Array<Record<string, unknown>> = [];
  let seen: () => void = () => undefined;
  let stalled = false;
  let buf = "";
  const decoder = new TextDecoder();
  const output = new WritableStream<Uint8Array>({
    write(chunk) {
      if (stalled) return new Promise<void>(() => undefined);
      buf += decoder.decode(chunk, { stream: true });
      for (let i = buf.indexOf("\n"); i !== -1; i = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
      }
      seen();
      return undefined;
    },
  });
  const answerNew: Array<() => void> = [];
  const app = acp.agent({ name: "t" });
  app.onRequest("initialize", () => ({ protocolVersion: 1, agentCapabilities: {} }));
  app.onRequest(
    "session/new",
    () =>
      new Promise<acp.NewSessionResponse>((resolve) => {
        answerNew.push(() => resolve({ sessionId: `s${answerNew.length}` }));
        seen();
      }),
  );
  const c = app.connect(acpWire(output, toAgent.readable, { end: { timers: clock } }));
  let isClosed = false;
  void c.closed.then(() => {
    isClosed = true;
    seen();
  });
  const writer = toAgent.writable.getWriter();
  const encoder = new TextEncoder();
  return {
    clock,
    lines,
    c,
    answerNew,
    send: (m) => writer.write(encoder.encode(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n")),
    endInput: () => writer.close(),
    until: async (pred) => {
      while (!pred()) await new Promise<void>((r) => (seen = r));
    },
    closed: () => isClosed,
    stallOutput: () => void (stalled = true),
  };
}

/** `initialize` answered, then `session/new` read and its handler running (not answering). */
async function started(r: Rig, ids: number[] = [2]): Promise<void> {
  await r.send({ id: 1, method: "initialize", params: { protocolVersion: 1 } });
  await r.until(() => r.lines.some((l) => l["id"] === 1));
  for (const id of ids) await r.send({ id, method: "session/new", params: { cwd: "/tmp", mcpServers: [] } });
  await r.until(() => r.answerNew.length === ids.length);
}

it("a request answered after the end of input is written, and the end then reaches the SDK without any bound passing", async () => {
  const r = rig();
  await started(r);
  await r.endInput();
  await r.clock.untilArmed();
  assert.equal(r.closed(), false, "the SDK has not seen the end while the request is unanswered");
  r.answerNew[0]!();
  await r.c.closed;
  assert.deepEqual(r.lines.at(-1), { jsonrpc: "2.0", id: 2, result: { sessionId: "s1" } });
  assert.equal(r.clock.pending, 0, "no timer left behind");
});

it(`a wedged handler holds the end for ${END_IDLE_MS} ms with nothing written, not one more`, async () => {
  const r = rig();
  await started(r);
  await r.endInput();
  await r.clock.untilArmed();
  r.clock.advance(END_IDLE_MS - 1);
  await settle();
  assert.equal(r.closed(), false, "still held 1 ms before the bound");
  r.clock.advance(1);
  await r.c.closed;
  // Its late answer is not written (the SDK has closed), and nothing else was.
  r.answerNew[0]!();
  await settle();
  assert.equal(r.lines.filter((l) => l["id"] === 2).length, 0);
});

it("an answer written restarts the idle bound: the end waits while requests keep being answered", async () => {
  const r = rig();
  await started(r, [2, 3]);
  await r.endInput();
  await r.clock.untilArmed();
  r.clock.advance(END_IDLE_MS - 1);
  r.answerNew[0]!();
  await r.until(() => r.lines.some((l) => l["id"] === 2));
  await settle(); // the write has finished through every stage
  r.clock.advance(END_IDLE_MS - 1);
  await settle();
  assert.equal(r.closed(), false, "the first answer restarted the bound");
  r.answerNew[1]!();
  await r.c.closed;
  assert.ok(r.lines.some((l) => l["id"] === 3), "the second answer is written too");
});

it(`an output that takes no write for ${END_STALL_MS} ms (stdout held unread) releases the end, not 1 ms sooner`, async () => {
  const r = rig();
  await started(r, [2, 3]);
  r.stallOutput();
  await r.endInput();
  await r.clock.untilArmed();
  // The first answer's write never finishes; the second request is still unanswered behind it.
  r.answerNew[0]!();
  await settle();
  r.clock.advance(END_STALL_MS - 1);
  await settle();
  assert.equal(r.closed(), false, "still held 1 ms before the stall bound");
  r.clock.advance(1);
  await r.c.closed;
});

it("at the end of input Berth's requests still waited for are withdrawn, and one sent while the end is held is written but not waited for", async () => {
  const r = rig();
  await started(r);
  const before = r.c.client.request("terminal/wait_for_exit", { sessionId: "s", terminalId: "t1" });
  await r.until(() => r.lines.some((l) => l["method"] === "terminal/wait_for_exit"));
  const asked = r.lines.find((l) => l["method"] === "terminal/wait_for_exit")!;
  await r.endInput();
  await assert.rejects(before, (e: { code?: number }) => e.code === -32800);
  await r.until(() => r.lines.some((l) => l["method"] === "$/cancel_request"));
  assert.deepEqual(r.lines.filter((l) => l["method"] === "$/cancel_request").map((l) => l["params"]), [{ requestId: asked["id"] }]);
  // The editor can no longer answer: a request made now (a cancelled command's terminal/kill) still goes out, and is
  // settled at once instead of being waited for until the connection closes.
  await assert.rejects(r.c.client.request("terminal/kill", { sessionId: "s", terminalId: "t1" }), (e: { code?: number }) => e.code === -32800);
  await r.until(() => r.lines.some((l) => l["method"] === "terminal/kill"));
  assert.equal(r.closed(), false, "the end is still held for session/new");
  r.answerNew[0]!();
  await r.c.closed;
  assert.equal(r.lines.filter((l) => l["method"] === "$/cancel_request").length, 1, "nothing withdrawn twice");
});
