/**
 * Backend protocol v6 changeset resources: `resource_snapshot`, `resource_action` (changeset
 * family and `session/changesetsChanged`) and `invokeChangesetOperation`, through real sockets.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { randomStrings } from "../helpers/prng.js";
import { changesetPrefix, MAX_CHANGESETS_PER_SESSION, reduceAnnotations, reduceChangeset } from "../../src/protocols/host/resources.js";
import { matchesUriTemplate } from "../../src/protocols/host/uri-template.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const file = (id: string, extra: Json = {}) => ({ id, edit: { after: { uri: id, content: { uri: `${id}#after` } } }, ...extra });
const ops = [
  { id: "stage", label: "Stage", scopes: ["changeset", "resource"], status: "idle" },
  { id: "revert", label: "Revert", scopes: ["range"], status: "disabled" },
];

async function v6(h: HostHandle, sourceId = "cs"): Promise<{ be: FakeBackend; reg: Json; uri: string }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId });
  assert.equal(reg.type, "registered");
  return { be, reg, uri: `${changesetPrefix(reg.session as string)}session` };
}
const ev = (be: FakeBackend, session: string, event: Json) => be.send({ type: "event", session, event });

test("resource_snapshot makes a confined changeset channel; actions are reduced as the official reducer does", () =>
  withHost(async (h) => {
    const { be, reg, uri } = await v6(h);
    const { c } = await AhpClient.init(h, [reg.session], "cs-client");
    ev(be, reg.session, { type: "resource_action", action: { type: "session/changesetsChanged", changesets: [{ label: "Session changes", uriTemplate: uri, changeKind: "session" }] } });
    await c.action((e) => e.action.type === "session/changesetsChanged");
    assert.equal((await c.request("subscribe", { channel: uri })).error.code, -32008, "no channel before its snapshot");
    ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "changeset", state: { status: "computing", files: [] } });
    be.send({ type: "ping", id: "s" });
    await be.next((f) => f.type === "pong");
    const sub = await c.request("subscribe", { channel: uri });
    let model = sub.result.snapshot.state as Json;
    assert.deepEqual<unknown>(model, { status: "computing", files: [] });
    const actions: Json[] = [
      { type: "changeset/fileSet", file: file("file:///a.ts") },
      { type: "changeset/fileSet", file: file("file:///b.ts") },
      { type: "changeset/fileSet", file: file("file:///a.ts", { reviewed: true }) },
      { type: "changeset/operationsChanged", operations: ops },
      { type: "changeset/statusChanged", status: "error", error: { errorType: "git", message: "index locked" } },
      { type: "changeset/statusChanged", status: "ready" },
      { type: "changeset/operationStatusChanged", operationId: "stage", status: "running" },
      { type: "changeset/fileRemoved", fileId: "file:///b.ts" },
    ];
    for (const action of actions) ev(be, reg.session, { type: "resource_action", channel: uri, action });
    await c.action((e) => e.action.type === "changeset/fileRemoved");
    for (const e of c.actions(uri)) model = reduceChangeset(model as never, e.action as never);
    const fresh = (await c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    assert.deepEqual<unknown>(fresh, model, "envelopes rebuild the snapshot");
    assert.deepEqual(fresh.files.map((f: Json) => [f.id, f.reviewed]), [["file:///a.ts", true]]);
    assert.equal(fresh.error, undefined, "a recovered changeset carries no stale error");
    assert.equal(fresh.operations[0].status, "running");
    // A replacing snapshot brings subscribers along with official actions.
    ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "changeset", state: { status: "ready", files: [file("file:///c.ts")] } });
    await c.action((e) => e.action.type === "changeset/operationsChanged" && e.action.operations === undefined);
    model = fresh;
    for (const e of c.actions(uri).slice(actions.length)) model = reduceChangeset(model as never, e.action as never);
    assert.deepEqual(model, { status: "ready", files: [file("file:///c.ts")] });
    assert.deepEqual((await c.request("subscribe", { channel: uri })).result.snapshot.state, model);
    const snap = await c.request("subscribe", { channel: reg.session });
    assert.equal(snap.result.snapshot.state.changesets[0].uriTemplate, uri);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("confinement, validation, bounds and version", () =>
  withHost(async (h) => {
    const a = await v6(h, "a");
    const b = await v6(h, "b");
    const bad: Array<[Json, RegExp]> = [
      [{ type: "resource_snapshot", resource: b.uri, kind: "changeset", state: { status: "ready", files: [] } }, /changeset resources of this session are/],
      [{ type: "resource_snapshot", resource: "ahp-changeset:/elsewhere/x", kind: "changeset", state: { status: "ready", files: [] } }, /changeset resources of this session are/],
      [{ type: "resource_snapshot", resource: a.uri, kind: "changeset", state: { status: "done", files: [] } }, /invalid changeset state/],
      [{ type: "resource_snapshot", resource: a.uri, kind: "mystery", state: {} }, /kind must be/],
      [{ type: "resource_action", channel: a.uri, action: { type: "changeset/cleared" } }, /send its resource_snapshot first/],
      [{ type: "resource_action", channel: b.uri, action: { type: "changeset/cleared" } }, /not owned/],
    ];
    for (const [event, re] of bad) {
      ev(a.be, a.reg.session, event);
      assert.match((await a.be.nextType("error")).message, re);
    }
    ev(a.be, a.reg.session, { type: "resource_snapshot", resource: a.uri, kind: "changeset", state: { status: "ready", files: [] } });
    ev(a.be, a.reg.session, { type: "resource_action", channel: a.uri, action: { type: "changeset/fileSet", file: { id: "x" } } });
    assert.match((await a.be.nextType("error")).message, /invalid .*changeset\/fileSet/);
    for (let i = 1; i < MAX_CHANGESETS_PER_SESSION; i++)
      ev(a.be, a.reg.session, { type: "resource_snapshot", resource: `${changesetPrefix(a.reg.session as string)}turn/${i}`, kind: "changeset", state: { status: "ready", files: [] } });
    a.be.send({ type: "ping", id: "full" });
    await a.be.next((f) => f.type === "pong");
    assert.equal(a.be.frames.filter((f) => f.type === "error").length, 0, `${MAX_CHANGESETS_PER_SESSION} changesets are accepted`);
    ev(a.be, a.reg.session, { type: "resource_snapshot", resource: `${changesetPrefix(a.reg.session as string)}turn/overflow`, kind: "changeset", state: { status: "ready", files: [] } });
    assert.match((await a.be.nextType("error")).message, /at most 64 changesets/);
    const { be: old, reg: oreg } = await FakeBackend.session(h, { protocolVersion: 5, sourceId: "old" });
    ev(old, oreg.session, { type: "resource_snapshot", resource: `${changesetPrefix(oreg.session as string)}s`, kind: "changeset", state: { status: "ready", files: [] } });
    assert.match((await old.nextType("error")).message, /requires protocol version 6/);
    for (const x of [a.be, b.be, old]) x.close();
  }));

test("invokeChangesetOperation: validated against operations and scopes, then sent; outcomes never retried", () =>
  withHost(async (h) => {
    const { be, reg, uri } = await v6(h);
    ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "changeset", state: { status: "ready", files: [file("file:///a.ts")], operations: ops } });
    be.send({ type: "ping", id: "s" });
    await be.next((f) => f.type === "pong");
    const { c } = await AhpClient.init(h, [], "inv");
    const refusals: Array<[Json, number]> = [
      [{ channel: "ahp-changeset:/nope/x", operationId: "stage" }, -32008],
      [{ channel: uri, operationId: "ghost" }, -32602],
      [{ channel: uri, operationId: "revert", target: { kind: "range", resource: "file:///a.ts", range: { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } } } }, -32602],
      [{ channel: uri, operationId: "stage", target: { kind: "range", resource: "file:///a.ts", range: { start: { line: 0, character: 0 }, end: { line: 1, character: 0 } } } }, -32602],
    ];
    for (const [params, code] of refusals) assert.equal((await c.request("invokeChangesetOperation", params)).error.code, code, JSON.stringify(params));
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0, "nothing invalid is sent");
    const target = { kind: "resource", resource: "file:///a.ts" };
    const call = c.request("invokeChangesetOperation", { channel: uri, operationId: "stage", target });
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "invoke_changeset_operation", operationId: "stage", resource: uri, target });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await call).result, {});
    const refused = c.request("invokeChangesetOperation", { channel: uri, operationId: "stage" });
    const cmd2 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: false, error: "detail" });
    assert.equal((await refused).error.data.outcome, "rejected");
    const lost = c.request("invokeChangesetOperation", { channel: uri, operationId: "stage" });
    await be.nextType("command");
    be.close();
    assert.equal((await lost).error.data.outcome, "indeterminate");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("matchesUriTemplate: the regular expression it replaced, without its exponential backtracking", () => {
  // The reference: each {…} as [^/]+, the rest literal.
  const reference = (t: string, u: string): boolean =>
    new RegExp(`^${t.split(/\{[^}]*\}/).map((x) => x.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[^/]+")}$`).test(u);
  const ts = randomStrings(30_000, 9, "a/{}x.", 17);
  const us = randomStrings(30_000, 9, "a/x.", 18);
  for (let i = 0; i < 30_000; i++) {
    const t = ts[i]!;
    const u = us[i]!;
    assert.equal(matchesUriTemplate(t, u), reference(t, u), JSON.stringify([t, u]));
  }
  assert.equal(matchesUriTemplate("ahp-changeset:/s/turn/{turnId}", "ahp-changeset:/s/turn/t1"), true);
  assert.equal(matchesUriTemplate("ahp-changeset:/s/turn/{turnId}", "ahp-changeset:/s/turn/t1/x"), false);
  // A backend's template of 1,000 variables against a URI that almost fits: the expression never returned.
  const hostile = "{v}x".repeat(1000);
  assert.equal(matchesUriTemplate(hostile, "x".repeat(1999) + "/"), false);
  assert.equal(matchesUriTemplate(hostile, "ax".repeat(1000)), true);
});

test("changeset/filesReviewChanged: client-dispatchable only with the review capability; echoed after acceptance", () =>
  withHost(async (h) => {
    const { be, reg } = await v6(h);
    const prefix = changesetPrefix(reg.session as string);
    const turn = `${prefix}turn/t1`;
    const plain = `${prefix}session`;
    ev(be, reg.session, {
      type: "resource_action",
      action: {
        type: "session/changesetsChanged",
        changesets: [
          { label: "Turn", uriTemplate: `${prefix}turn/{turnId}`, changeKind: "turn", capabilities: { review: {} } },
          { label: "Session", uriTemplate: plain, changeKind: "session" },
        ],
      },
    });
    for (const uri of [turn, plain]) ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "changeset", state: { status: "ready", files: [file("a"), file("b")] } });
    be.send({ type: "ping", id: "s" });
    await be.next((f) => f.type === "pong");
    const { c } = await AhpClient.init(h, [turn, plain], "reviewer");
    const seq = c.dispatch(turn, { type: "changeset/filesReviewChanged", files: ["a", "zzz"], reviewed: true });
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: turn, action: { type: "changeset/filesReviewChanged", files: ["a", "zzz"], reviewed: true } });
    assert.equal(c.actions(turn).length, 0, "not echoed before the backend accepts");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const echo = await c.action((e) => e.channel === turn);
    assert.deepEqual(echo.origin, { clientId: "reviewer", clientSeq: seq });
    let state = (await c.request("subscribe", { channel: turn })).result.snapshot.state as Json;
    assert.deepEqual(state.files.map((f: Json) => f.reviewed), [true, undefined]);
    // The backend may originate it too.
    ev(be, reg.session, { type: "resource_action", channel: turn, action: { type: "changeset/filesReviewChanged", files: ["a"], reviewed: false } });
    await c.action((e) => e.channel === turn && e.action.reviewed === false);
    state = (await c.request("subscribe", { channel: turn })).result.snapshot.state as Json;
    assert.equal(state.files[0].reviewed, false);
    c.dispatch(plain, { type: "changeset/filesReviewChanged", files: ["a"], reviewed: true });
    assert.match((await c.action((e) => e.channel === plain && e.rejectionReason !== undefined)).rejectionReason, /review capability/);
    c.dispatch(turn, { type: "changeset/cleared" });
    assert.match((await c.action((e) => e.channel === turn && e.rejectionReason !== undefined)).rejectionReason, /not client-dispatchable/);
    c.dispatch(turn, { type: "changeset/filesReviewChanged", files: ["b"], reviewed: true });
    const cmd2 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: false, error: "no" });
    await c.action((e) => e.channel === turn && e.rejectionReason === "backend refused the action");
    state = (await c.request("subscribe", { channel: turn })).result.snapshot.state as Json;
    assert.equal(state.files[1].reviewed, undefined, "a refused review changes nothing");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("annotations: one confined channel per session, reduced as the official actions say, replaceable", () =>
  withHost(async (h) => {
    const { be, reg } = await v6(h, "notes");
    const uri = `${reg.session as string}/annotations`;
    const note = (id: string, entries = [{ id: "e1", text: "first" }]) => ({ id, turnId: "t1", resource: "file:///a.ts", resolved: false, entries });
    ev(be, reg.session, { type: "resource_snapshot", resource: `${reg.session as string}/notes`, kind: "annotations", state: { annotations: [] } });
    assert.match((await be.nextType("error")).message, /annotations resource of this session is/);
    ev(be, reg.session, { type: "resource_action", channel: uri, action: { type: "annotations/removed", annotationId: "x" } });
    assert.match((await be.nextType("error")).message, /send its resource_snapshot first/);
    ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "annotations", state: { annotations: [note("n1")] } });
    be.send({ type: "ping", id: "s" });
    await be.next((f) => f.type === "pong");
    const { c } = await AhpClient.init(h, [uri], "notes-client");
    let model = (await c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    const actions: Json[] = [
      { type: "annotations/set", annotation: note("n2") },
      { type: "annotations/entrySet", annotationId: "n1", entry: { id: "e2", text: { markdown: "**second**" } } },
      { type: "annotations/updated", annotationId: "n1", resolved: true },
      { type: "annotations/entryRemoved", annotationId: "n1", entryId: "e1" },
      { type: "annotations/removed", annotationId: "n2" },
    ];
    for (const action of actions) ev(be, reg.session, { type: "resource_action", channel: uri, action });
    await c.action((e) => e.action.type === "annotations/removed");
    for (const e of c.actions(uri)) model = reduceAnnotations(model as never, e.action as never);
    const fresh = (await c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    assert.deepEqual(fresh, model);
    assert.deepEqual(fresh.annotations.map((a: Json) => [a.id, a.resolved, a.entries.map((e: Json) => e.id)]), [["n1", true, ["e2"]]]);
    ev(be, reg.session, { type: "resource_action", channel: uri, action: { type: "annotations/entryRemoved", annotationId: "n1", entryId: "e2" } });
    assert.match((await be.nextType("error")).message, /at least one entry/);
    ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "annotations", state: { annotations: [note("n3")] } });
    await c.action((e) => e.action.type === "annotations/set" && e.action.annotation.id === "n3");
    model = fresh;
    for (const e of c.actions(uri).slice(actions.length)) model = reduceAnnotations(model as never, e.action as never);
    assert.deepEqual(model, { annotations: [note("n3")] });
    assert.deepEqual((await c.request("subscribe", { channel: uri })).result.snapshot.state, model);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("annotations counts: SessionSummary/SessionState.annotations follow the channel; root hears each change of count", () =>
  withHost(async (h) => {
    const { be, reg } = await v6(h, "counted");
    const uri = `${reg.session as string}/annotations`;
    const note = (id: string, entries = [{ id: "e1", text: "first" }]) => ({ id, turnId: "t1", resource: "file:///a.ts", resolved: false, entries });
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.session], "counts");
    const item = async () => ((await c.request("listSessions", {})).result.items as Json[]).find((x) => x.resource === reg.session)!;
    const sessionState = async () => (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.equal((await item()).annotations, undefined, "no annotations channel, no summary");
    assert.equal((await sessionState()).annotations, undefined);
    const counts = () => c.notes.filter((n) => n.method === "root/sessionSummaryChanged" && n.params.session === reg.session && n.params.changes.annotations).map((n) => n.params.changes.annotations as Json);
    const steps: Array<[Json, [number, number] | null]> = [
      [{ type: "resource_snapshot", resource: uri, kind: "annotations", state: { annotations: [note("n1")] } }, [1, 1]],
      [{ type: "resource_action", channel: uri, action: { type: "annotations/entrySet", annotationId: "n1", entry: { id: "e2", text: "reply" } } }, [1, 2]],
      [{ type: "resource_action", channel: uri, action: { type: "annotations/updated", annotationId: "n1", resolved: true } }, null],
      [{ type: "resource_action", channel: uri, action: { type: "annotations/entrySet", annotationId: "n1", entry: { id: "e2", text: "edited" } } }, null],
      [{ type: "resource_action", channel: uri, action: { type: "annotations/set", annotation: note("n2", [{ id: "a", text: "x" }, { id: "b", text: "y" }]) } }, [2, 4]],
      [{ type: "resource_action", channel: uri, action: { type: "annotations/removed", annotationId: "n1" } }, [1, 2]],
      [{ type: "resource_snapshot", resource: uri, kind: "annotations", state: { annotations: [] } }, [0, 0]],
    ];
    const expected: Json[] = [];
    for (const [event, want] of steps) {
      ev(be, reg.session, event);
      await be.roundTrip();
      if (want) expected.push({ resource: uri, annotationCount: want[0], entryCount: want[1] });
      // The listSessions reply follows, on the same socket, anything the event made the host announce.
      const listed = await item();
      await until(() => counts().length === expected.length, 3000, `summary change ${expected.length}`);
      assert.deepEqual(counts(), expected, "a change that leaves the counts alone announces nothing");
      assert.deepEqual(listed.annotations, expected.at(-1), "listSessions carries the current counts");
      assert.deepEqual((await sessionState()).annotations, expected.at(-1), "so does the session state");
    }
    assert.equal(be.frames.some((f) => f.type === "error"), false, JSON.stringify(be.frames));
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("client annotation actions: validated, sent as apply_resource_action, echoed (and counted) only after acceptance", () =>
  withHost(async (h) => {
    const { be, reg } = await v6(h, "client-notes");
    const uri = `${reg.session as string}/annotations`;
    const note = (id: string, entries = [{ id: "e1", text: "first" }]) => ({ id, turnId: "t1", resource: "file:///a.ts", resolved: false, entries });
    const { c } = await AhpClient.init(h, ["ahp-root://"], "annotator");
    // No channel yet: the action is ignored (no echo, nothing sent), as for any unknown channel.
    c.dispatch(uri, { type: "annotations/set", annotation: note("early") });
    ev(be, reg.session, { type: "resource_snapshot", resource: uri, kind: "annotations", state: { annotations: [note("n1")] } });
    await be.roundTrip();
    let model = (await c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    assert.deepEqual(model, { annotations: [note("n1")] }, "the early action changed nothing");
    const echo = (seq: number) => c.action((e) => e.channel === uri && e.origin?.clientSeq === seq, `echo ${seq}`);

    // Refused before anything is sent: malformed, and an action that would empty an annotation.
    const malformed = c.dispatch(uri, { type: "annotations/set", annotation: { id: "x", turnId: "t1", resource: "file:///a.ts", resolved: false, entries: [] } });
    assert.match((await echo(malformed)).rejectionReason, /invalid "annotations\/set": .*>=1 items/);
    const emptying = c.dispatch(uri, { type: "annotations/entryRemoved", annotationId: "n1", entryId: "e1" });
    assert.match((await echo(emptying)).rejectionReason, /at least one entry/);
    const unknown = c.dispatch(uri, { type: "annotations/cleared" });
    assert.ok((await echo(unknown)).rejectionReason);
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0, "nothing invalid reaches the backend");

    // Accepted: sent verbatim, then echoed with the client's origin, reduced, and counted.
    const reply = { type: "annotations/entrySet", annotationId: "n1", entry: { id: "e2", text: { markdown: "**agreed**" } } };
    const seq = c.dispatch(uri, reply);
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: uri, action: reply });
    assert.equal(c.actions(uri).some((e) => e.origin?.clientSeq === seq), false, "no echo before the backend accepts");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const accepted = await echo(seq);
    assert.equal(accepted.rejectionReason, undefined);
    assert.deepEqual(accepted.action, reply);
    await c.note("root/sessionSummaryChanged", (p) => p.session === reg.session && p.changes.annotations?.entryCount === 2);
    const counts = c.notes.filter((n) => n.method === "root/sessionSummaryChanged" && n.params.changes.annotations).map((n) => n.params.changes.annotations as Json);
    assert.deepEqual(counts, [1, 2].map((entryCount) => ({ resource: uri, annotationCount: 1, entryCount })), "the snapshot, then the accepted reply");

    // Refused and indeterminate outcomes are rejections; the state keeps the accepted change only.
    const refused = c.dispatch(uri, { type: "annotations/removed", annotationId: "n1" });
    const cmd2 = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: false, error: "read-only review" });
    assert.equal((await echo(refused)).rejectionReason, "backend refused the action");
    for (const e of c.actions(uri)) if (e.rejectionReason === undefined) model = reduceAnnotations(model as never, e.action as never);
    const fresh = (await c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    assert.deepEqual(fresh, model, "accepted echoes rebuild the snapshot");
    assert.deepEqual(fresh.annotations[0].entries.map((e: Json) => e.id), ["e1", "e2"]);
    const lost = c.dispatch(uri, { type: "annotations/updated", annotationId: "n1", resolved: true });
    await be.nextType("command");
    be.close();
    assert.equal((await echo(lost)).rejectionReason, "backend outcome indeterminate");
    const gone = c.dispatch(uri, { type: "annotations/updated", annotationId: "n1", resolved: true });
    assert.equal((await echo(gone)).rejectionReason, "the host did not send this to the backend: it is not connected; retry once it reconnects");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));
