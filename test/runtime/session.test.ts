/**
 * SessionRuntime against the loopback fake provider and a real session store: queue with revisions, pause,
 * approvals by ID, cancellation during an approval, steering, clear, and the event order a door observes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { SessionPaths } from "../../src/store/sessions/paths.js";
import { SessionHub, type SessionEvent, type SessionRuntime } from "../../src/runtime/session/index.js";
import { collectHubEvents } from "../helpers/hub-events.js";

interface Rig {
  fake: FakeProvider;
  hub: SessionHub;
  rt: SessionRuntime;
  events: SessionEvent[];
  cwd: string;
  home: string;
  /** Resolves with the first event (from index `from`) matching. */
  next: (pred: (e: SessionEvent) => boolean, from?: number) => Promise<SessionEvent>;
}

async function withRig(fn: (r: Rig) => Promise<void>, cfg: { approval?: "on-risk" | "never" | "always"; images?: boolean } = {}): Promise<void> {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "sr-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "sr-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model", ...(cfg.images === true ? { images: true } : {}) }] } } }));
  const env = { PATH: process.env.PATH, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const manager = new SessionManager(new SessionStore({ home }));
  const hub = new SessionHub({ manager, runner: new Agent({ home, cwd, env }), defaults: { cwd, ...(cfg.approval ? { approval: cfg.approval } : {}) } });
  const { events, next } = collectHubEvents(hub);
  const rt = await hub.create();
  try {
    await fn({ fake, hub, rt, events, cwd, home, next });
  } finally {
    await hub.close();
    await manager.drain();
    await fake.close();
  }
}

const terminal = (e: SessionEvent): boolean => e.type === "turn_completed" || e.type === "turn_cancelled" || e.type === "turn_failed";
const types = (es: SessionEvent[]): string[] => es.filter((e) => e.type !== "runtime").map((e) => e.type);

test("submit on an idle session runs at once; a second prompt is queued and dequeued after the terminal", async () => {
  await withRig(async ({ fake, rt, events, next }) => {
    fake.script([{ steps: [{ waitForAbort: true }] }]);
    const first = rt.submit("first");
    assert.equal(first.revision, 1);
    const started = await next((e) => e.type === "turn_started");
    const second = rt.submit("second", { submitter: "alice" });
    assert.deepEqual(events.find((e) => e.type === "queue_enqueued"), { type: "queue_enqueued", sessionId: rt.id, entry: second });
    await fake.waitForRequests(1);
    assert.equal(rt.cancel(), true);
    const done = await next((e) => e.type === "turn_completed");
    const order = types(events).filter((t) => t !== "assistant_delta");
    assert.deepEqual(order.slice(order.indexOf("turn_cancelled")), ["turn_cancelled", "queue_dequeued", "turn_started", "assistant_completed", "turn_completed"]);
    const deq = events.find((e) => e.type === "queue_dequeued");
    assert.ok(deq?.type === "queue_dequeued" && done.type === "turn_completed" && deq.turnId === done.turnId && deq.queueId === second.queue_id);
    assert.ok(started.type === "turn_started" && started.submitter === "client");
    assert.ok(done.type === "turn_completed" && done.text === "echo: second" && done.steps === 1);
  });
});

test("queue operations check revisions; a stale change gets a conflict with the current entry", async () => {
  await withRig(async ({ rt, next, events }) => {
    rt.pause(true);
    const a = rt.submit("a");
    const b = rt.submit("b");
    const up = rt.updateQueued(a.queue_id, 1, "a2");
    assert.ok(up.ok && up.entry.revision === 2 && up.entry.prompt === "a2");
    const stale = rt.updateQueued(a.queue_id, 1, "a3");
    assert.deepEqual(stale, { ok: false, error: "conflict", current: { ...a, prompt: "a2", revision: 2 } });
    assert.deepEqual(rt.removeQueued("nope", 1), { ok: false, error: "not_found" });
    const mv = rt.moveQueued(b.queue_id, 1, a.queue_id);
    assert.ok(mv.ok);
    assert.deepEqual(rt.snapshot().map((e) => e.prompt), ["b", "a2"]);
    const rm = rt.removeQueued(a.queue_id, 2);
    assert.ok(rm.ok);
    assert.deepEqual(rt.snapshot().map((e) => e.queue_id), [b.queue_id]);
    // Unpausing an idle session dequeues at once.
    const from = events.length;
    rt.pause(false);
    const t = await next(terminal, from);
    assert.equal(t.type, "turn_completed");
    assert.deepEqual(types(events.slice(from)).slice(0, 3), ["paused", "queue_dequeued", "turn_started"]);
  });
});

test("on-risk approvals: bash asks by a fresh ID; approval runs it; a denial completes it denied", async () => {
  await withRig(async ({ fake, rt, next, cwd }) => {
    fake.script([
      { steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: "echo hi" } } }] },
      { steps: [{ toolCall: { id: "c2", name: "bash", arguments: { command: "echo no" } } }] },
      { steps: [{ text: "done" }] },
    ]);
    rt.submit("go");
    const a1 = await next((e) => e.type === "approval_requested");
    assert.ok(a1.type === "approval_requested");
    assert.deepEqual([a1.callId, a1.name, a1.risk, a1.cwd, a1.summary], ["c1", "bash", "process", cwd, "Run shell command: echo hi"]);
    assert.equal(rt.resolveApproval("not-an-id", true), false);
    assert.equal(rt.resolveApproval(a1.approvalId, true), true);
    assert.equal(rt.resolveApproval(a1.approvalId, true), false, "answered once");
    const c1 = await next((e) => e.type === "tool_completed");
    assert.ok(c1.type === "tool_completed" && c1.success && c1.output.includes("hi"));
    const a2 = await next((e) => e.type === "approval_requested" && e.callId === "c2");
    assert.ok(a2.type === "approval_requested" && a2.approvalId !== a1.approvalId);
    rt.resolveApproval(a2.approvalId, false);
    const c2 = await next((e) => e.type === "tool_completed" && e.callId === "c2");
    assert.ok(c2.type === "tool_completed" && !c2.success && c2.error === "denied" && c2.output.includes("denied"));
    const t = await next(terminal);
    assert.ok(t.type === "turn_completed" && t.steps === 3);
  });
});

test("on-risk over every tool: read_skill and confined reads never ask, web_fetch asks as network", async () => {
  await withRig(async ({ fake, rt, next, home }) => {
    fake.script([
      { steps: [{ toolCall: { id: "c1", name: "read_skill", arguments: { name: "nope" } } }] },
      { steps: [{ toolCall: { id: "c2", name: "read", arguments: { path: join(home, "settings.json") } } }] },
      { steps: [{ toolCall: { id: "c3", name: "web_fetch", arguments: { url: "https://example.invalid/" } } }] },
      { steps: [{ text: "done" }] },
    ]);
    rt.submit("go");
    const c1 = await next((e) => e.type === "tool_completed" && e.callId === "c1");
    assert.ok(c1.type === "tool_completed" && !c1.success && /unknown skill "nope"/.test(c1.output));
    // The policy-wrapped read keeps its read_only risk (no approval) and the state root stays unreadable.
    const c2 = await next((e) => e.type === "tool_completed" && e.callId === "c2");
    assert.ok(c2.type === "tool_completed" && c2.error === "denied" && /Berth's state directory is not readable/.test(c2.output));
    const a = await next((e) => e.type === "approval_requested");
    assert.ok(a.type === "approval_requested" && a.callId === "c3" && a.name === "web_fetch" && a.risk === "network");
    rt.resolveApproval(a.approvalId, false);
    const c3 = await next((e) => e.type === "tool_completed" && e.callId === "c3");
    assert.ok(c3.type === "tool_completed" && c3.error === "denied");
    const t = await next(terminal);
    assert.equal(t.type, "turn_completed");
  });
});

test("cancel while an approval is pending withdraws it and the call ends cancelled", async () => {
  await withRig(async ({ fake, rt, next }) => {
    fake.script([{ steps: [{ toolCall: { id: "c1", name: "write", arguments: { path: "x.txt", content: "x" } } }] }]);
    rt.submit("go");
    const a = await next((e) => e.type === "approval_requested");
    assert.ok(a.type === "approval_requested" && a.risk === "filesystem");
    rt.cancel();
    const w = await next((e) => e.type === "approval_resolved");
    assert.ok(w.type === "approval_resolved" && w.cancelled);
    assert.deepEqual(rt.pendingApprovals(), []);
    const c = await next((e) => e.type === "tool_completed");
    assert.ok(c.type === "tool_completed" && c.error === "cancelled");
    assert.equal((await next(terminal)).type, "turn_cancelled");
    assert.equal(rt.resolveApproval(a.approvalId, true), false);
  });
});

test("steering reaches the model at the next step boundary as its own user message", async () => {
  await withRig(
    async ({ fake, rt, next }) => {
      fake.script([{ steps: [{ toolCall: { id: "c1", name: "ls", arguments: {} } }] }, { steps: [{ text: "ok" }] }]);
      rt.submit("list files");
      await next((e) => e.type === "tool_proposed");
      assert.equal(rt.steer("also count them"), true);
      assert.equal((await next(terminal)).type, "turn_completed");
      const body = fake.requests[1]?.json as { messages: Array<{ role: string; content: unknown }> };
      const last = body.messages[body.messages.length - 1];
      assert.equal(last?.role, "user");
      assert.match(JSON.stringify(last?.content), /also count them/);
    },
    { approval: "never" },
  );
});

test("a steer after the turn's terminal event is refused: no turn is running any more", async () => {
  await withRig(async ({ fake, hub, rt, next, events }) => {
    fake.script([{ steps: [{ text: "done" }] }]);
    // Steered from the terminal event's own delivery, as a door that has just seen it and answers at once.
    let steered: boolean | null = null;
    const off = hub.subscribe((e) => {
      if (terminal(e) && steered === null) steered = rt.steer("one more thing");
    });
    rt.submit("hello");
    assert.equal((await next(terminal)).type, "turn_completed");
    off();
    assert.equal(steered, false);
    assert.equal(events.filter((e) => e.type === "turn_started").length, 1, "the refused steer started no turn");
  });
});

test("clear empties the model context; a failed turn's next prompt stands alone", async () => {
  await withRig(async ({ fake, rt, next, events }) => {
    fake.script([{ status: 400, body: "{}" }]);
    rt.submit("try the build again");
    const f = await next(terminal);
    assert.ok(f.type === "turn_failed" && f.code === "provider_error");
    let from = events.length;
    rt.submit("Actually, fix bar.c instead");
    await next(terminal, from);
    const body = fake.requests[fake.requests.length - 1]?.json as { messages: Array<{ role: string; content: unknown }> };
    const users = body.messages.filter((m) => m.role === "user").map((m) => JSON.stringify(m.content));
    assert.equal(users.length, 2, "the interrupted prompt and the new one are separate messages");
    assert.match(users[1]!, /Actually, fix bar.c instead/);
    assert.doesNotMatch(users[1]!, /try the build/);
    assert.deepEqual(await rt.clear(), { ok: true });
    from = events.length;
    rt.submit("fresh");
    await next(terminal, from);
    const after = fake.requests[fake.requests.length - 1]?.json as { messages: Array<{ role: string }> };
    assert.deepEqual(after.messages.filter((m) => m.role !== "system").length, 1);
  });
});

test("server-started turns carry their origin; with autoApprove they run without asking", async () => {
  await withRig(async ({ fake, rt, next, events }) => {
    rt.configure({ autoApprove: true });
    rt.pause(true); // queued first: the origin survives the queue
    fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: "echo bg" } } }] }, { steps: [{ text: "reported" }] }]);
    rt.startServerTurn("job-1 finished", { kind: "background", jobs: ["job-1"] });
    rt.pause(false);
    const started = await next((e) => e.type === "turn_started");
    assert.ok(started.type === "turn_started" && started.origin?.kind === "background" && started.submitter === "server");
    const t = await next(terminal);
    assert.ok(t.type === "turn_completed" && t.origin?.jobs?.[0] === "job-1");
    assert.equal(events.some((e) => e.type === "approval_requested"), false);
    const c = events.find((e) => e.type === "tool_completed");
    assert.ok(c?.type === "tool_completed" && c.success);
  });
});

test("per-session configuration reaches the provider request: no tools, channel section, model, image attachments", async () => {
  await withRig(async ({ fake, rt, next, events, cwd }) => {
    const png = join(cwd, "p.png");
    writeFileSync(png, Buffer.from("89504e470d0a1a0a", "hex"));
    assert.deepEqual(await rt.describe(), { providerId: "fake", modelId: "fake-model", contextWindow: 128000, images: false });
    assert.equal(rt.configure({ noTools: true, channel: "WeChat", selection: { model: "other-model" } }), true);
    assert.equal((await rt.describe())?.modelId, "other-model");
    const entry = rt.submit("what is this?", { attachments: [{ kind: "image", path: png, name: "p.png", mime: "image/png", size: 8 }] });
    assert.deepEqual(entry.attachments, [{ kind: "image", path: png, name: "p.png", mime: "image/png", size: 8 }]);
    const started = await next((e) => e.type === "turn_started");
    assert.ok(started.type === "turn_started" && started.attachments?.length === 1);
    await next(terminal);
    const body = fake.requests.at(-1)!.json as { model: string; tools?: unknown[]; messages: Array<{ role: string; content: unknown }> };
    assert.equal(body.model, "other-model");
    assert.equal(body.tools, undefined, "no tools advertised");
    const text = JSON.stringify(body.messages);
    assert.match(text, /Chat channel: you are talking with the user through WeChat/);
    assert.match(text, /\[Attached files\]/);
    assert.doesNotMatch(text, new RegExp(png.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")), "a tool-free session sees no paths");
    assert.equal(events.filter((e) => e.type === "title_changed").length, 1);
  });
});

test("an image attachment that is a FIFO is skipped without blocking the turn", { timeout: 60_000 }, async () => {
  await withRig(
    async ({ fake, rt, next, cwd }) => {
      const png = join(cwd, "p.png");
      writeFileSync(png, Buffer.from("89504e470d0a1a0a", "hex"));
      // More FIFOs than the libuv pool has threads: a blocking open of each would stall the turn for good.
      const fifos = Array.from({ length: 6 }, (_, i) => join(cwd, `f${i}.png`));
      for (const f of fifos) execFileSync("mkfifo", [f]);
      const attachments = [...fifos.map((path) => ({ kind: "image" as const, path })), { kind: "image" as const, path: png }];
      rt.submit("look", { attachments });
      assert.equal((await next(terminal)).type, "turn_completed");
      assert.equal((JSON.stringify(fake.requests.at(-1)!.json).match(/data:image\/png;base64/g) ?? []).length, 1);
    },
    { images: true },
  );
});

test("history keeps image paths: earlier images are read again for later requests, a deleted one becomes a note", async () => {
  await withRig(
    async ({ fake, rt, next, events, cwd }) => {
      const png = join(cwd, "p.png");
      writeFileSync(png, Buffer.from("89504e470d0a1a0a", "hex"));
      rt.submit("look", { attachments: [{ kind: "image", path: png, name: "p.png", size: 8 }] });
      await next(terminal);
      const count = (): string[] => JSON.stringify(fake.requests.at(-1)!.json).match(/data:image\/png;base64/g) ?? [];
      assert.equal(count().length, 1);
      let from = events.length;
      rt.submit("and now?");
      await next(terminal, from);
      assert.equal(count().length, 1, "the earlier image is sent again");
      rmSync(png);
      from = events.length;
      rt.submit("still there?");
      await next(terminal, from);
      assert.equal(count().length, 0);
      assert.match(JSON.stringify(fake.requests.at(-1)!.json), /the attached image p.png is no longer available/);
    },
    { images: true },
  );
});

test("each turn's user record is written once and reaches the provider once per turn, attachments kept", async () => {
  await withRig(async ({ fake, rt, next, events, cwd, home }) => {
    const note = join(cwd, "notes.txt");
    writeFileSync(note, "n");
    const prompts = ["first prompt", "second prompt", "third prompt"];
    for (const [i, p] of prompts.entries()) {
      const from = events.length;
      rt.submit(p, i === 1 ? { attachments: [{ kind: "file", path: note, name: "notes.txt" }] } : {});
      assert.equal((await next(terminal, from)).type, "turn_completed");
    }
    const userTexts = (json: unknown): string[] =>
      (json as { messages: Array<{ role: string; content: string | Array<{ type: string; text?: string }> }> }).messages
        .filter((m) => m.role === "user")
        .map((m) => (typeof m.content === "string" ? m.content : m.content.map((c) => c.text ?? "").join("")));
    assert.equal(fake.requests.length, 3);
    for (const [i, r] of fake.requests.entries()) {
      const texts = userTexts(r.json);
      assert.equal(texts.length, i + 1, `request ${i + 1} carries each turn's user message once`);
      for (const [j, p] of prompts.slice(0, i + 1).entries()) assert.ok(texts[j]?.startsWith(p), `request ${i + 1}, message ${j + 1}`);
    }
    const records = readFileSync(new SessionPaths(home).data(rt.id), "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { kind: string; text?: string; turn_id?: string; attachments?: unknown[] });
    const users = records.filter((r) => r.kind === "user");
    assert.deepEqual(users.map((r) => r.text), prompts);
    assert.deepEqual(users[1]?.attachments, [{ kind: "file", path: note, name: "notes.txt" }]);
    const started = events.filter((e) => e.type === "turn_started").map((e) => (e.type === "turn_started" ? e.turnId : ""));
    assert.deepEqual(users.map((r) => r.turn_id), started);
    assert.equal(records.filter((r) => r.kind === "terminal").length, 3);
  });
});
