/**
 * Reconnect guarantees for provider `berth`, end to end (AHP client → host → adapter → Agent →
 * loopback fake provider):
 *  - RC-CONFIRM: a pending tool confirmation is not lost when its client's socket dies. With no
 *    client connected the turn keeps waiting (not cancelled, not auto-denied); a fresh client
 *    (`initialize` + subscribe) sees it in its snapshot, a returning client (`reconnect` from its
 *    last serverSeq) sees it in its retained state plus the replay, and either may answer it.
 *  - RC-REPLAY: `reconnect` from the last seen serverSeq yields exactly the missed envelopes: the
 *    events seen before, the replay and the live events after are the full ordered sequence,
 *    without gap or duplicate.
 *  - RC-SNAPSHOT: when the gap is older than the bounded replay buffer, `reconnect` answers with
 *    snapshots whose state holds the full text, and the subscription stays live.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, until, type Json } from "./helpers.js";
import { ended, newSession, startTurn, withBerth, type World } from "./berth-rig.js";
import { REPLAY_LIMIT, STATUS } from "../../src/protocols/host/model.js";
import { wsText } from "../../src/transport/ws-text.js";

const TERMINAL = ["chat/turnComplete", "chat/turnCancelled", "chat/error"];

/** The highest serverSeq a client has seen (0 when none). */
function lastSeq(c: AhpClient): number {
  return c.actions().reduce((m, e) => Math.max(m, e.serverSeq as number), 0);
}

/** Kill the client's socket without a close handshake (a crashed client or a dropped network). */
function crash(c: AhpClient): number {
  const seq = lastSeq(c); // read in the same tick as the kill: nothing can arrive in between
  c.ws.terminate();
  return seq;
}

/** A client-side reduction of one turn's markdown text from snapshot parts plus envelopes. */
function turnText(turnId: string, envs: Json[], parts: Json[] = []): string {
  const md = new Map<string, string>();
  for (const p of parts) if (p.kind === "markdown") md.set(p.id as string, p.content as string);
  for (const e of envs) {
    const a = e.action as Json;
    if (a.turnId !== turnId || e.rejectionReason !== undefined) continue;
    if (a.type === "chat/responsePart" && (a.part as Json).kind === "markdown") md.set((a.part as Json).id as string, (a.part as Json).content as string);
    if (a.type === "chat/delta" && md.has(a.partId as string)) md.set(a.partId as string, md.get(a.partId as string)! + (a.content as string));
  }
  return [...md.values()].join("");
}

/** The markdown text of a completed turn as the host holds it. */
function heldText(w: World, chat: string, turnId: string): string {
  const t = w.h.state.chatIndex.get(chat)!.turns.find((x) => x.id === turnId)!;
  return (t.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content).join("");
}

/**
 * No client is connected and the host has dropped the dead client's subscriptions. The turn must
 * stay exactly where it was: still active, the tool still pending confirmation (and listed as
 * input needed), the runtime's turn not aborted, no further model request, no side effect.
 * A close-triggered cancellation or auto-deny would be a command the host sends the runtime when
 * it handles the close; the runtime's ping/pong round trip (`sync`) returns only after everything
 * the host sent before its pong has been handled, so no grace window (sleep) is needed.
 */
async function assertStillWaiting(w: World, session: string, chat: string, turnId: string, toolCallId: string, file: string): Promise<void> {
  const { h, rt, fake } = w;
  await until(() => !h.state.subs.has(chat) && !h.state.subs.has(session), 3000, "the host dropping the dead client's subscriptions");
  const requests = fake.requests.length;
  await rt.sync();
  const c = h.state.chatIndex.get(chat)!;
  assert.equal(c.activeTurn?.id, turnId, "the turn is still running");
  const tc = (c.activeTurn.responseParts as Json[]).find((p) => p.kind === "toolCall" && (p.toolCall as Json).toolCallId === toolCallId)!;
  assert.equal((tc.toolCall as Json).status, "pending-confirmation", "not cancelled, not auto-denied");
  assert.equal(h.state.sessions.get(session)!.inputNeeded.has(`tool:${toolCallId}`), true);
  const live = rt.inspect(session);
  assert.deepEqual([live?.turnId, live?.pendingApprovals], [turnId, 1], "the runtime's turn is not aborted and still asks");
  assert.equal(fake.requests.length, requests, "the model was not told anything (no denial went back)");
  assert.equal(existsSync(join(w.cwd, file)), false, "nothing ran without an answer");
}

test("a pending tool confirmation survives a client reconnect (fresh initialize, and reconnect from the last serverSeq)", () =>
  withBerth(async (w) => {
    const { h, fake, cwd } = w;
    const { c: a } = await AhpClient.init(h, [], "c1");
    const { session, chat } = await newSession(a, "ahp-session:/approve-after-crash", cwd);
    fake.script([
      { steps: [{ text: "Writing it." }, { toolCall: { id: "w1", name: "write", arguments: { path: "approved.txt", content: "approved" } } }] },
      { steps: [{ text: " Done: " }, { text: "approved.txt written." }] },
    ]);
    startTurn(a, chat, "t1", "write approved.txt");
    const ready = await a.action((e) => e.action.type === "chat/toolCallReady" && e.action.turnId === "t1" && e.action.confirmed === undefined, "confirmation", 10_000);
    await a.action((e) => e.channel === session && e.action.type === "session/inputNeededSet", "inputNeededSet");
    const toolCallId = ready.action.toolCallId as string;
    const beforeA = a.actions();
    const seqA = crash(a);

    await assertStillWaiting(w, session, chat, "t1", toolCallId, "approved.txt");

    // B: a fresh client. Its snapshots carry the pending confirmation.
    const { c: b, result } = await AhpClient.init(h, [session, chat], "c2");
    const [sSnap, cSnap] = result.snapshots as Json[];
    assert.equal(sSnap!.state.status & STATUS.InputNeeded, STATUS.InputNeeded);
    const need = (sSnap!.state.inputNeeded as Json[]).find((r) => r.id === `tool:${toolCallId}`)!;
    assert.equal(need.kind, "toolConfirmation");
    assert.equal(need.chat, chat);
    assert.equal(cSnap!.state.activeTurn.id, "t1");
    const part = (cSnap!.state.activeTurn.responseParts as Json[]).find((p) => p.kind === "toolCall")!.toolCall as Json;
    assert.equal(part.toolCallId, toolCallId);
    assert.equal(part.status, "pending-confirmation");
    assert.deepEqual(JSON.parse(part.toolInput as string), { path: "approved.txt", content: "approved" });

    // C: client c1 coming back with `reconnect` from the last serverSeq it saw. Nothing it has
    // not seen is missing; its retained state plus the replay still shows the pending call.
    const c = await AhpClient.open(h);
    c.clientSeq = a.clientSeq;
    const rep = (await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [session, chat] })).result;
    assert.equal(rep.type, "replay");
    assert.deepEqual(rep.missing, []);
    const seenByC = [...beforeA, ...(rep.actions as Json[])];
    const seqsC = seenByC.map((e) => e.serverSeq as number);
    assert.deepEqual(seqsC, [...new Set(seqsC)].sort((x, y) => x - y), "ordered, no duplicate");
    assert.ok(!seenByC.some((e) => e.action.toolCallId === toolCallId && e.action.type !== "chat/toolCallReady" && e.action.type !== "chat/toolCallStart"), "the call is still unresolved");
    assert.ok(!seenByC.some((e) => TERMINAL.includes(e.action.type)), "the turn is still open");

    // B approves; the tool really runs in the session's working directory; the turn completes.
    b.dispatch(chat, { type: "chat/toolCallConfirmed", turnId: "t1", toolCallId, approved: true, confirmed: "user-action" });
    for (const x of [b, c]) {
      const echo = await x.action((e) => e.action.type === "chat/toolCallConfirmed" && e.action.toolCallId === toolCallId, "confirmation echo", 10_000);
      assert.equal(echo.origin?.clientId, "c2");
      const done = await x.action((e) => e.action.type === "chat/toolCallComplete" && e.action.toolCallId === toolCallId, "tool complete", 10_000);
      assert.equal(done.action.result.success, true);
      assert.equal((await ended(x, "t1")).action.type, "chat/turnComplete");
      await x.action((e) => e.channel === session && e.action.type === "session/inputNeededRemoved" && e.action.id === `tool:${toolCallId}`);
    }
    assert.equal(readFileSync(join(cwd, "approved.txt"), "utf8"), "approved");
    const expected = "Writing it. Done: approved.txt written.";
    assert.equal(heldText(w, chat, "t1"), expected);
    assert.equal(turnText("t1", b.actions(chat), cSnap!.state.activeTurn.responseParts as Json[]), expected);
    assert.equal(turnText("t1", [...seenByC, ...c.actions()].filter((e) => e.channel === chat)), expected);
    assert.deepEqual([...b.invalid, ...c.invalid, ...a.invalid], []);
    b.close();
    c.close();
  }));

test("a confirmation requested while no client is connected is replayed to the returning client, who answers it", () =>
  withBerth(async (w) => {
    const { h, fake, cwd } = w;
    const { c: a } = await AhpClient.init(h, [], "c1");
    const { session, chat } = await newSession(a, "ahp-session:/asked-while-away", cwd);
    fake.script([
      { steps: [{ text: "Running it." }, { delayMs: 400 }, { toolCall: { id: "b1", name: "bash", arguments: { command: "printf ran > ran.txt" } } }] },
      { steps: [{ text: " It ran." }] },
    ]);
    startTurn(a, chat, "t1", "run it");
    await a.action((e) => e.action.type === "chat/responsePart" && e.action.turnId === "t1", "first text", 10_000);
    const beforeA = a.actions();
    const seqA = crash(a);
    assert.ok(!beforeA.some((e) => e.action.type === "chat/toolCallReady"), "premise: the request comes after the crash");

    // The request arrives at the host while nobody listens; the turn then waits.
    await until(() => h.state.sessions.get(session)!.inputNeeded.size === 1, 10_000, "the confirmation request");
    const toolCallId = ([...h.state.sessions.get(session)!.inputNeeded.keys()][0] as string).slice("tool:".length);
    await assertStillWaiting(w, session, chat, "t1", toolCallId, "ran.txt");

    const c = await AhpClient.open(h);
    c.clientSeq = a.clientSeq;
    const rep = (await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [session, chat] })).result;
    assert.equal(rep.type, "replay");
    const replay = rep.actions as Json[];
    assert.ok(replay.every((e) => e.serverSeq > seqA));
    const ready = replay.find((e) => e.action.type === "chat/toolCallReady" && e.action.toolCallId === toolCallId && e.action.confirmed === undefined);
    assert.ok(ready, "the replay carries the confirmation request");
    assert.deepEqual(JSON.parse(ready.action.toolInput as string), { command: "printf ran > ran.txt" });
    assert.ok(replay.some((e) => e.channel === session && e.action.type === "session/inputNeededSet" && e.action.request.id === `tool:${toolCallId}`));

    c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId: "t1", toolCallId, approved: true, confirmed: "user-action" });
    const echo = await c.action((e) => e.action.type === "chat/toolCallConfirmed" && e.action.toolCallId === toolCallId, "echo", 10_000);
    assert.deepEqual(echo.origin, { clientId: "c1", clientSeq: a.clientSeq + 1 });
    assert.equal((await c.action((e) => e.action.type === "chat/toolCallComplete" && e.action.toolCallId === toolCallId, "tool complete", 10_000)).action.result.success, true);
    assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete");
    assert.equal(readFileSync(join(cwd, "ran.txt"), "utf8"), "ran");
    const all = [...beforeA, ...replay, ...c.actions()].filter((e) => e.channel === chat);
    assert.equal(turnText("t1", all), "Running it. It ran.");
    assert.equal(heldText(w, chat, "t1"), "Running it. It ran.");
    assert.deepEqual([...a.invalid, ...c.invalid], []);
    c.close();
  }));

test("reconnect from the last seen serverSeq mid-stream misses no event and repeats none", () =>
  withBerth(async (w) => {
    const { h, fake, cwd } = w;
    const { c: a } = await AhpClient.init(h, [], "c1");
    const { session, chat } = await newSession(a, "ahp-session:/mid-stream", cwd);
    // An observer stays connected throughout: its envelopes are the reference sequence.
    const { c: o } = await AhpClient.init(h, [session, chat], "observer");
    const words = ["alpha ", "beta ", "gamma ", "delta"];
    fake.script([{ steps: [{ text: words[0]!, chunks: 2 }, { delayMs: 300 }, { text: words[1]!, chunks: 2 }, { delayMs: 300 }, { text: words[2]!, chunks: 2 }, { delayMs: 300 }, { text: words[3]!, chunks: 2 }] }]);
    const baseline = h.state.serverSeq;
    startTurn(a, chat, "s1", "stream slowly");
    await a.action((e) => e.action.type === "chat/delta" && e.action.turnId === "s1", "first delta", 10_000);
    const beforeA = a.actions().filter((e) => e.serverSeq > baseline);
    const seqA = crash(a);

    // Wait until something was published while A was away (the second word), then come back.
    await o.action((e) => e.serverSeq > seqA && e.action.type === "chat/delta" && e.action.content.includes("be"), "a delta published while away", 10_000);
    const c = await AhpClient.open(h);
    const rep = (await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [session, chat] })).result;
    assert.equal(rep.type, "replay");
    const replay = rep.actions as Json[];
    assert.ok(replay.length > 0, "the gap was replayed");
    assert.ok(!replay.some((e) => TERMINAL.includes(e.action.type)), "premise: reconnected while still streaming");
    assert.equal((await ended(c, "s1")).action.type, "chat/turnComplete");
    await ended(o, "s1");

    const union = [...beforeA, ...replay, ...c.actions()];
    const seqs = union.map((e) => e.serverSeq as number);
    for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i]! > seqs[i - 1]!, `ordered without duplicate at ${i}: ${seqs[i - 1]} then ${seqs[i]}`);
    const reference = o.actions().filter((e) => e.serverSeq > baseline);
    assert.deepEqual(union, reference, "before + replay + live = the full sequence");
    // And nothing was published on these channels that neither saw (no gap in the reference either).
    assert.deepEqual(reference.map((e) => e.serverSeq), h.state.replaySince(baseline, new Set([session, chat]))!.map((e) => e.serverSeq));
    assert.ok(c.actions().length > 0, "live events followed the replay");
    assert.equal(turnText("s1", union), words.join(""));
    assert.equal(heldText(w, chat, "s1"), words.join(""));
    assert.deepEqual([...a.invalid, ...c.invalid, ...o.invalid], []);
    c.close();
    o.close();
  }));

test("a gap older than the replay buffer gets snapshots with the full text, and the subscription stays live", () =>
  withBerth(async (w) => {
    const { h, cwd } = w;
    const { c: a } = await AhpClient.init(h, [], "c1");
    const { session, chat } = await newSession(a, "ahp-session:/long-gap", cwd);
    const n = REPLAY_LIMIT + 500; // one chat/delta per word: more than the buffer holds
    startTurn(a, chat, "g1", `long answer ${n}`);
    await a.action((e) => e.action.type === "chat/delta" && e.action.turnId === "g1", "first delta", 10_000);
    const seqA = crash(a);
    await until(() => h.state.chatIndex.get(chat)!.turns.some((t) => t.id === "g1"), 15_000, "the long turn to complete");
    assert.ok(h.state.serverSeq - seqA > REPLAY_LIMIT, `premise: the gap (${h.state.serverSeq - seqA}) exceeds the buffer`);

    const c = await AhpClient.open(h);
    const rep = (await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [session, chat] })).result;
    assert.equal(rep.type, "snapshot");
    const snaps = rep.snapshots as Json[];
    assert.deepEqual(snaps.map((s) => s.resource), [session, chat]);
    for (const s of snaps) assert.equal(s.fromSeq, h.state.serverSeq);
    const turn = (snaps[1]!.state.turns as Json[]).find((t) => t.id === "g1")!;
    assert.equal(turn.state, "complete");
    const text = (turn.responseParts as Json[]).filter((p) => p.kind === "markdown").map((p) => p.content).join("");
    assert.equal(text, "word ".repeat(n));
    assert.equal(snaps[0]!.state.status & STATUS.InProgress, 0);

    // Live from the snapshot on: the next turn's events arrive, in order, right after fromSeq.
    startTurn(c, chat, "g2", "after the gap");
    assert.equal((await ended(c, "g2")).action.type, "chat/turnComplete");
    const live = c.actions();
    assert.ok(live[0]!.serverSeq > (snaps[1]!.fromSeq as number));
    assert.equal(turnText("g2", live), "echo: after the gap");
    assert.deepEqual([...a.invalid, ...c.invalid], []);
    c.close();
  }));

/** Send several messages in one TCP segment (JSON-RPC clients may pipeline) and record arrival order. */
async function pipelined(c: AhpClient, send: () => Array<Promise<Json>>): Promise<{ responses: Json[]; order: Json[] }> {
  const order: Json[] = [];
  c.ws.on("message", (d) => order.push(JSON.parse(wsText(d)) as Json));
  const raw = (c.ws as unknown as { _socket: import("node:net").Socket })._socket;
  raw.cork();
  const pending = send();
  raw.uncork();
  return { responses: await Promise.all(pending), order };
}

test("a pipelined reconnect or subscribe is answered before any envelope published after its replay or snapshot", () =>
  withBerth(async (w) => {
    const { h, fake, cwd } = w;
    const { c: a } = await AhpClient.init(h, [], "c1");
    const { session, chat } = await newSession(a, "ahp-session:/pipelined", cwd);
    fake.script([{ steps: [{ text: "one " }, { delayMs: 300 }, { text: "two " }, { waitForAbort: true }] }]);
    startTurn(a, chat, "p1", "stop me");
    await a.action((e) => e.action.type === "chat/responsePart" && e.action.turnId === "p1", "first text", 10_000);
    const seqA = crash(a);
    await until(() => (h.state.chatIndex.get(chat)!.activeTurn?.responseParts as Json[] | undefined)?.some((p) => String(p.content).includes("two")) === true, 10_000, "a delta while away");

    // The user presses stop while the client reconnects: `reconnect` and the cancel share a segment.
    const c = await AhpClient.open(h);
    const { responses, order } = await pipelined(c, () => {
      const r = c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [session, chat] });
      c.dispatch(chat, { type: "chat/turnCancelled", turnId: "p1", duration: 0 });
      return [r];
    });
    const rep = responses[0]!.result;
    assert.equal(rep.type, "replay");
    const cancelled = await c.action((e) => e.action.type === "chat/turnCancelled" && e.action.turnId === "p1", "cancel echo");
    const replayed = (rep.actions as Json[]).map((e) => e.serverSeq as number);
    assert.ok(replayed.length > 0 && replayed.every((s) => s > seqA && s < cancelled.serverSeq), JSON.stringify({ seqA, replayed, c: cancelled.serverSeq }));
    const first = order.findIndex((m) => m.id !== undefined || m.params?.serverSeq > seqA);
    assert.equal(order[first]!.id, 1, `the reconnect answer comes first, got ${JSON.stringify(order[first]).slice(0, 120)}`);

    // Same for subscribe: its snapshot is never overtaken by a later envelope for that channel.
    const { c: d } = await AhpClient.init(h, [], "c3");
    const { responses: sub, order: dOrder } = await pipelined(d, () => {
      const r = d.request("subscribe", { channel: chat });
      d.dispatch(chat, { type: "chat/noSuchAction" });
      return [r];
    });
    const echo = await d.action((e) => e.action.type === "chat/noSuchAction" && e.rejectionReason !== undefined, "rejection echo");
    assert.ok(echo.serverSeq > sub[0]!.result.snapshot.fromSeq);
    assert.ok(dOrder.findIndex((m) => m.id !== undefined) < dOrder.findIndex((m) => m.method === "action"), "the subscribe answer comes first");
    assert.deepEqual([...a.invalid, ...c.invalid, ...d.invalid], []);
    c.close();
    d.close();
  }));

test("a chat/turnStarted resent after a drop with its turnId is refused: the prompt runs once, and the replay shows it ran", () =>
  withBerth(async (w) => {
    const { h, fake, cwd } = w;
    const { c: a } = await AhpClient.init(h, [], "c1");
    const { session, chat } = await newSession(a, "ahp-session:/resent-prompt", cwd);
    fake.script([{ steps: [{ text: "Hello " }, { delayMs: 300 }, { text: "there." }] }, { steps: [{ text: "a second run" }] }]);
    const seqA = lastSeq(a);
    const sent = startTurn(a, chat, "r1", "say hello");
    // The client dies right after sending, before reading anything; the host has the prompt.
    await until(() => h.state.chatIndex.get(chat)!.activeTurn?.id === "r1", 10_000, "the host admitting the prompt");
    a.ws.terminate();

    // The client comes back while the turn still runs and, unsure whether its prompt arrived, sends it again.
    const c = await AhpClient.open(h);
    c.clientSeq = a.clientSeq;
    const rep = (await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [session, chat] })).result;
    assert.equal(rep.type, "replay");
    const own = (rep.actions as Json[]).find((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "r1");
    assert.deepEqual(own?.origin, { clientId: "c1", clientSeq: sent }, "the replay shows the prompt was started, under the client's own origin");
    const again = startTurn(c, chat, "r1", "say hello");
    const refused = await c.action((e) => e.origin?.clientSeq === again, "the resent prompt's echo");
    assert.equal(refused.rejectionReason, 'turn "r1" was already started in this chat (a resent prompt is not run twice); send a new turnId for a new prompt');
    assert.equal((await ended(c, "r1")).action.type, "chat/turnComplete");

    // Sent once more after the turn ended (a client retrying late): still refused, and nothing runs.
    const late = startTurn(c, chat, "r1", "say hello");
    assert.equal((await c.action((e) => e.origin?.clientSeq === late, "the late resend's echo")).rejectionReason, refused.rejectionReason);
    await w.rt.sync();
    assert.equal(fake.requests.length, 1, "the model was asked once");
    assert.deepEqual(h.state.chatIndex.get(chat)!.turns.map((t) => t.id), ["r1"]);
    assert.equal(heldText(w, chat, "r1"), "Hello there.");
    assert.deepEqual([...a.invalid, ...c.invalid], []);
    c.close();
  }));
