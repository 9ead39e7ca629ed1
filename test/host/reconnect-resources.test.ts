/**
 * `reconnect` across removed changeset and annotations channels (backend v6 resources), as AHP defines for any
 * channel: a channel that is gone is `missing` (replay) or has no snapshot (snapshot); a channel that came back under
 * its URI (the session's source registered again and resent it) is not the one the client holds, so the answer is
 * snapshots, never a replay applied onto the removed channel's state. The removed session's resource channels also
 * lose their subscribers, as its session and chat channels do.
 * Real sockets: a fake v6 backend over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { changesetPrefix } from "../../src/protocols/host/resources.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const ROOT = "ahp-root://";
const lastSeq = (c: AhpClient) => c.actions().reduce((m, e) => Math.max(m, e.serverSeq as number), 0);
const file = (id: string) => ({ id, edit: { after: { uri: id, content: { uri: `${id}#after` } } } });
const note = (id: string, text: string) => ({ id, turnId: "T1", resource: "file:///a.ts", resolved: false, entries: [{ id: `${id}-e`, text }] });

async function register(h: HostHandle, sourceId: string): Promise<{ be: FakeBackend; session: string; changeset: string; annotations: string }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId });
  assert.equal(reg.type, "registered");
  const session = reg.session as string;
  return { be, session, changeset: `${changesetPrefix(session)}session`, annotations: `${session}/annotations` };
}

/** The backend sends both resources with the given contents; resolves once the host holds them. */
async function sendResources(be: FakeBackend, session: string, changeset: string, annotations: string, tag: string): Promise<void> {
  be.send({ type: "event", session, event: { type: "resource_snapshot", resource: changeset, kind: "changeset", state: { status: "ready", files: [file(`file:///${tag}.ts`)] } } });
  be.send({ type: "event", session, event: { type: "resource_snapshot", resource: annotations, kind: "annotations", state: { annotations: [note(`n-${tag}`, tag)] } } });
  await be.roundTrip();
}

test("a changeset and an annotations channel removed with their session, then sent again, are answered with snapshots; gone ones are missing", () =>
  withHost(async (h) => {
    const first = await register(h, "res-reborn");
    const { session, changeset, annotations } = first;
    await sendResources(first.be, session, changeset, annotations, "old");
    const { c: a } = await AhpClient.init(h, [ROOT, session, changeset, annotations], "c1");
    // A change the client sees live: its lastSeenServerSeq is after it.
    first.be.send({ type: "event", session, event: { type: "resource_action", channel: changeset, action: { type: "changeset/fileSet", file: file("file:///old2.ts") } } });
    await a.action((e) => e.channel === changeset && e.action.type === "changeset/fileSet");
    const seen = lastSeq(a);
    assert.ok(seen > 0);
    a.ws.terminate();

    // While the client is away the session is disposed: its resources go with it.
    const { c: other } = await AhpClient.init(h, [changeset], "other");
    assert.equal((await other.request("disposeSession", { channel: session })).result, null);
    first.be.close();
    assert.equal(h.state.subs.get(changeset), undefined, "the removed changeset keeps no subscriber");

    // Gone: a replay lists both in missing.
    const r1 = await AhpClient.open(h);
    const gone = (await r1.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: [ROOT, session, changeset, annotations] })).result;
    assert.equal(gone.type, "replay");
    assert.deepEqual(gone.missing, [session, changeset, annotations]);
    r1.close();

    // The source registers again and resends its resources with other contents.
    const again = await register(h, "res-reborn");
    assert.equal(again.session, session, "premise: the session comes back under its URI");
    await sendResources(again.be, session, changeset, annotations, "new");

    const r2 = await AhpClient.open(h);
    const back = (await r2.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: [ROOT, changeset, annotations] })).result;
    // A replay would leave the removed changeset's files and the removed annotations in the client's state.
    assert.equal(back.type, "snapshot", "the resources came back: snapshots, not a replay onto the removed ones");
    const snaps = back.snapshots as Json[];
    assert.deepEqual(snaps.map((s) => s.resource), [ROOT, changeset, annotations]);
    assert.deepEqual((snaps[1]!.state.files as Json[]).map((f) => f.id), ["file:///new.ts"]);
    assert.deepEqual((snaps[2]!.state.annotations as Json[]).map((n) => n.id), ["n-new"]);
    // Live from the snapshot on.
    again.be.send({ type: "event", session, event: { type: "resource_action", channel: changeset, action: { type: "changeset/fileRemoved", fileId: "file:///new.ts" } } });
    await r2.action((e) => e.channel === changeset && e.action.type === "changeset/fileRemoved");
    assert.equal(other.actions(changeset).filter((e) => e.action.type === "changeset/fileRemoved").length, 0, "the subscription of the removed changeset ended");
    assert.deepEqual([...a.invalid, ...r1.invalid, ...r2.invalid, ...other.invalid], []);
    r2.close();
    other.close();
    again.be.close();
  }));

test("a reconnect from after the resources' removal and return is a replay again", () =>
  withHost(async (h) => {
    const first = await register(h, "res-after");
    const { session, changeset, annotations } = first;
    await sendResources(first.be, session, changeset, annotations, "old");
    const { c: other } = await AhpClient.init(h, [ROOT], "other");
    assert.equal((await other.request("disposeSession", { channel: session })).result, null);
    first.be.close();
    const again = await register(h, "res-after");
    await sendResources(again.be, session, changeset, annotations, "new");
    // A client that subscribed after the return holds the new channels.
    const { c: a } = await AhpClient.init(h, [ROOT, changeset, annotations], "c1");
    const seen = h.state.serverSeq;
    a.ws.terminate();
    again.be.send({ type: "event", session, event: { type: "resource_action", channel: annotations, action: { type: "annotations/removed", annotationId: "n-new" } } });
    await until(() => h.state.serverSeq > seen, 3000, "the change");
    const r = await AhpClient.open(h);
    const rep = (await r.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: [ROOT, changeset, annotations] })).result;
    assert.equal(rep.type, "replay");
    assert.deepEqual(rep.missing, []);
    assert.deepEqual((rep.actions as Json[]).filter((e) => e.channel === annotations).map((e) => e.action.type), ["annotations/removed"]);
    r.close();
    other.close();
    again.be.close();
  }));
