/**
 * Backend protocol v6 resources across a host restart (changesets, annotations, the changeset
 * catalogue), and OTLP stream subscriptions across an AHP `reconnect` (AHP lifecycle: stateless
 * channels are re-subscribed, missed messages dropped). Real sockets, a real state directory.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import Database from "better-sqlite3";
import { AhpClient, FakeBackend, tempHome, type Json } from "./helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { changesetPrefix } from "../../src/protocols/host/resources.js";
import { otlpChannel } from "../../src/protocols/host/notifications.js";

const file = (id: string, extra: Json = {}) => ({ id, edit: { after: { uri: id, content: { uri: `${id}#after` } } }, ...extra });
const note = (id: string, entries = [{ id: "e1", text: "first" }]) => ({ id, turnId: "t1", resource: "file:///a.ts", resolved: false, entries });

async function session(h: HostHandle): Promise<{ be: FakeBackend; reg: Json; ev: (e: Json) => void }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "kept", instanceId: "i1" });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  return { be, reg, ev: (event: Json) => be.send({ type: "event", session: reg.session, event }) };
}
async function state(c: AhpClient, channel: string): Promise<Json | undefined> {
  const r = await c.request("subscribe", { channel });
  return r.error ? undefined : (r.result.snapshot.state as Json);
}

test("changesets, annotations and the catalogue survive a restart; unreadable rows are dropped, not trusted", async () => {
  const home = tempHome();
  let reg: Json = {};
  let kept: { changeset?: Json | undefined; notes?: Json | undefined; catalogue?: Json | undefined; summary?: Json | undefined } = {};
  let changeset = "";
  let notes = "";
  const h1 = await startHost({ home, log: () => {} });
  try {
    const s = await session(h1);
    reg = s.reg;
    changeset = `${changesetPrefix(reg.session as string)}turn/t1`;
    notes = `${reg.session as string}/annotations`;
    s.ev({ type: "resource_action", action: { type: "session/changesetsChanged", changesets: [{ label: "Turn", uriTemplate: `${changesetPrefix(reg.session as string)}turn/{turnId}`, changeKind: "turn", capabilities: { review: {} } }] } });
    s.ev({ type: "resource_snapshot", resource: changeset, kind: "changeset", state: { status: "computing", files: [] } });
    // A burst of changes in one batch: the final state is what is stored.
    for (const id of ["file:///a.ts", "file:///b.ts", "file:///c.ts"]) s.ev({ type: "resource_action", channel: changeset, action: { type: "changeset/fileSet", file: file(id) } });
    s.ev({ type: "resource_action", channel: changeset, action: { type: "changeset/fileRemoved", fileId: "file:///b.ts" } });
    s.ev({ type: "resource_action", channel: changeset, action: { type: "changeset/statusChanged", status: "ready" } });
    s.ev({ type: "resource_snapshot", resource: notes, kind: "annotations", state: { annotations: [note("n1")] } });
    await s.be.roundTrip();
    const { c } = await AhpClient.init(h1, [notes], "before");
    // A client action accepted by the backend is stored as well.
    const seq = c.dispatch(notes, { type: "annotations/entrySet", annotationId: "n1", entry: { id: "e2", text: "reply" } });
    const cmd = await s.be.nextType("command");
    s.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    await c.action((e) => e.origin?.clientSeq === seq);
    const sess = (await state(c, reg.session as string))!;
    kept = { changeset: await state(c, changeset), notes: await state(c, notes), catalogue: sess.changesets, summary: sess.annotations };
    assert.deepEqual(kept.changeset!.files.map((f: Json) => f.id), ["file:///a.ts", "file:///c.ts"]);
    assert.equal(kept.notes!.annotations[0].entries.length, 2);
    assert.deepEqual(c.invalid, []);
    c.close();
    s.be.close();
  } finally {
    await h1.close();
  }

  const h2 = await startHost({ home, log: () => {} });
  try {
    const { c } = await AhpClient.init(h2, [], "after");
    assert.deepEqual(await state(c, changeset), kept.changeset, "the changeset is served before any backend reconnects");
    assert.deepEqual(await state(c, notes), kept.notes);
    const sess = (await state(c, reg.session as string))!;
    assert.deepEqual([sess.changesets, sess.annotations], [kept.catalogue, kept.summary]);
    const listed = ((await c.request("listSessions", {})).result.items as Json[]).find((x) => x.resource === reg.session)!;
    assert.deepEqual(listed.annotations, kept.summary);
    // The returning backend replaces the state; subscribers follow with official actions.
    const s = await session(h2);
    assert.equal(s.reg.session, reg.session);
    s.ev({ type: "resource_snapshot", resource: changeset, kind: "changeset", state: { status: "ready", files: [file("file:///d.ts")] } });
    await c.action((e) => e.channel === changeset && e.action.type === "changeset/contentChanged");
    // The restored catalogue still grants the review capability.
    c.dispatch(changeset, { type: "changeset/filesReviewChanged", files: ["file:///d.ts"], reviewed: true });
    const cmd = await s.be.nextType("command");
    assert.equal(cmd.command.type, "apply_resource_action");
    s.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    await c.action((e) => e.channel === changeset && e.action.type === "changeset/filesReviewChanged");
    kept.changeset = await state(c, changeset);
    assert.deepEqual(kept.changeset, { status: "ready", files: [file("file:///d.ts", { reviewed: true })] });
    assert.deepEqual(c.invalid, []);
    c.close();
    s.be.close();
  } finally {
    await h2.close();
  }

  // A damaged row (and a row of a session the host no longer has) is dropped and counted.
  const db = new Database(join(home, "host", "host.db"));
  db.prepare(`UPDATE resources SET state = '{"annotations":[{"id":"x"}]}' WHERE kind = 'annotations'`).run();
  db.prepare(`INSERT INTO resources (uri, session_uri, kind, state) VALUES (?, ?, 'changeset', '{"status":"ready","files":[]}')`).run("ahp-changeset:/gone/x", "ahp-session:/gone");
  db.close();
  const logs: string[] = [];
  const h3 = await startHost({ home, log: (l) => logs.push(l) });
  try {
    const { c } = await AhpClient.init(h3, [], "damaged");
    assert.deepEqual(await state(c, changeset), kept.changeset, "intact rows still load");
    assert.equal(await state(c, notes), undefined, "the damaged annotations are not served");
    assert.equal(await state(c, "ahp-changeset:/gone/x"), undefined);
    assert.ok(logs.some((l) => /2 stored resource\(s\) unreadable or orphaned; ignored/.test(l)), logs.join("\n"));
    assert.deepEqual(c.invalid, []);
    c.close();
  } finally {
    await h3.close();
  }
});

test("reconnect keeps otlp stream subscriptions (no snapshot, nothing replayed) and lists only unknown channels as missing", async () => {
  const h = await startHost({ home: tempHome(), log: () => {} });
  try {
    const { be } = await FakeBackend.provider(h, 6, ["tel"], { telemetry: { logs: true, traces: true } });
    const { c: first, result } = await AhpClient.init(h, ["ahp-root://"], "tel");
    assert.deepEqual((await first.request("subscribe", { channel: otlpChannel("logs") })).result, {});
    const export1 = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: "one" } }] }] }] };
    be.send({ type: "notification", method: "otlp/exportLogs", params: { channel: otlpChannel("logs"), payload: export1 } });
    await first.note("otlp/exportLogs");
    first.close();
    // Replay path: the stream is re-subscribed; the export sent while away is not replayed.
    const r = await AhpClient.open(h);
    const rep = await r.request("reconnect", { channel: "ahp-root://", clientId: "tel", lastSeenServerSeq: result.serverSeq as number, subscriptions: ["ahp-root://", otlpChannel("logs"), "ahp-otlp://berth/nothing"] });
    assert.equal(rep.result.type, "replay");
    assert.deepEqual(rep.result.missing, ["ahp-otlp://berth/nothing"]);
    const export2 = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ body: { stringValue: "two" } }] }] }] };
    be.send({ type: "notification", method: "otlp/exportLogs", params: { channel: otlpChannel("logs"), payload: export2 } });
    assert.deepEqual(await r.note("otlp/exportLogs"), { channel: otlpChannel("logs"), payload: export2 });
    assert.equal(r.notes.filter((n) => n.method === "otlp/exportLogs").length, 1, "nothing from before the reconnect");
    // Snapshot path (a sequence the host never issued): snapshots for stateful channels only.
    const s = await AhpClient.open(h);
    const snap = await s.request("reconnect", { clientId: "tel-2", lastSeenServerSeq: 1_000_000, subscriptions: ["ahp-root://", otlpChannel("traces")] });
    assert.equal(snap.result.type, "snapshot");
    assert.deepEqual((snap.result.snapshots as Json[]).map((x) => x.resource), ["ahp-root://"]);
    const traces = { resourceSpans: [] };
    be.send({ type: "notification", method: "otlp/exportTraces", params: { channel: otlpChannel("traces"), payload: traces } });
    assert.deepEqual(await s.note("otlp/exportTraces"), { channel: otlpChannel("traces"), payload: traces });
    assert.deepEqual([...r.invalid, ...s.invalid], []);
    r.close();
    s.close();
    be.close();
  } finally {
    await h.close();
  }
});
