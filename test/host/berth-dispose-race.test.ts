/**
 * A Berth session disposed by an AHP client while its re-registration with the host is in flight, end to end: the
 * real host, Berth's backend, and a tap between them (`backend-tap.ts`) that only delays one direction of the
 * stream to pick the interleaving. The re-registration is the backend's answer to a real `event_rejected` naming
 * its current epoch: the tap writes a sequenced event the host refuses, as if the backend had sent it.
 * After the disposal is accepted the session is gone on both sides: the host lists nothing and announces nothing
 * new, and the backend neither serves the session nor keeps (or asks for) a registration of it; one the host
 * granted after the disposal is retired with `unregister_session`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, until, type Json } from "./helpers.js";
import { newSession, withBerth } from "./berth-rig.js";
import type { BackendTap } from "./backend-tap.js";
import type { BerthRuntimeBackend } from "../../src/backends/berth/backend.js";

/** The session's source and current epoch, from the registration frames the tap saw. */
function registration(t: BackendTap, uri: string): { source: string; epoch: string } {
  const regs = t.frames("up").filter((f) => f.type === "register_session" && f.hello.requestedSession === uri);
  assert.equal(regs.length, 1, "one registration (the creation's claim)");
  const answer = t.frames("down").find((f) => f.type === "session_registered" && f.requestId === regs[0]!.requestId);
  assert.ok(answer, "the claim was answered");
  return { source: regs[0]!.hello.sourceId as string, epoch: answer.backendConnectionId as string };
}

/** The host semantically rejects a sequenced event on `epoch` (an unknown event type) and answers `event_rejected`. */
function rejectOn(t: BackendTap, uri: string, epoch: string): void {
  const sent = t.frames("up").filter((f) => f.type === "sequenced_event" && f.backendConnectionId === epoch);
  const sequence = sent.length === 0 ? 1 : (sent.at(-1)!.sequence as number) + 1;
  t.inject("up", { type: "sequenced_event", session: uri, sequence, backendConnectionId: epoch, event: { type: "no_such_event" } });
}

/** The host's `dispose_session` command for `uri` (once it was sent). */
const disposeCommand = (t: BackendTap, uri: string): Json | undefined =>
  t.frames("down").find((f) => f.type === "provider_command" && f.command?.type === "dispose_session" && f.command.session === uri);

/** Everything the backend began for the frames it received so far has reached the host, and been answered. */
async function settled(rt: BerthRuntimeBackend): Promise<void> {
  await rt.sync();
  await rt.registrationsSent();
  await rt.sync();
  await rt.sync();
}

/** A command on (`uri`, `epoch`) written to the backend as the host would: the backend's answer. */
async function probe(t: BackendTap, rt: BerthRuntimeBackend, uri: string, epoch: string, id: string): Promise<Json> {
  t.inject("down", { type: "command", commandId: id, backendInstanceId: rt.instanceId, session: uri, backendConnectionId: epoch, command: { type: "abort" } });
  let r: Json | undefined;
  await until(() => (r = t.frames("up").find((f) => f.type === "command_result" && f.commandId === id)) !== undefined, 10_000, `the answer to ${id}`);
  return r!;
}

/** The host holds no session and announced none after `uri` was removed. */
async function goneOnHost(c: AhpClient, h: { state: { sessions: Map<string, unknown> } }, uri: string): Promise<void> {
  assert.deepEqual([...h.state.sessions.keys()], [], "the host holds no session");
  assert.deepEqual((await c.request("listSessions", {})).result.items, [], "a client lists no session");
  const removed = c.notes.findIndex((n) => n.method === "root/sessionRemoved" && n.params.session === uri);
  assert.ok(removed !== -1, "the removal was announced");
  const added = c.notes.slice(removed).filter((n) => n.method === "root/sessionAdded");
  assert.deepEqual(added.map((n) => n.params.summary.resource), [], "no session appeared after the removal");
  assert.deepEqual(c.invalid, []);
}

test("a session disposed while its re-registration awaits the host's answer is not revived by that answer; the registration is unregistered", () =>
  withBerth(
    async ({ h, rt, tap, cwd }) => {
      const t = tap!;
      const { c } = await AhpClient.init(h, ["ahp-root://"]);
      const uri = "ahp-session:/race-answer";
      await newSession(c, uri, cwd);
      const { source, epoch } = registration(t, uri);
      // The backend's re-registration, and all it writes after, waits in the tap: the host answers it only later.
      t.holdFrom("up", (f) => f.type === "register_session" && f.hello.sourceId === source);
      rejectOn(t, uri, epoch);
      await until(() => t.held("up").length > 0, 10_000, "the re-registration (held)");
      const reg = t.held("up")[0]!;
      const disposed = c.request("disposeSession", { channel: uri });
      // The backend has disposed the session and accepted; its answer waits behind the registration.
      await until(() => disposeCommand(t, uri) !== undefined, 10_000, "dispose_session sent");
      const commandId = disposeCommand(t, uri)!.commandId as string;
      await until(() => t.held("up").some((f) => f.type === "command_result" && f.commandId === commandId), 10_000, "the disposal accepted (held)");
      t.release("up"); // the host registers the session anew, answers, and only then reads the acceptance
      assert.equal((await disposed).result, null, JSON.stringify((await disposed).error));
      await settled(rt);

      const answer = t.frames("down").find((f) => f.type === "session_registered" && f.requestId === reg.requestId);
      assert.ok(answer, "the host granted the late registration");
      const late = answer.backendConnectionId as string;
      const unregs = t.frames("up").filter((f) => f.type === "unregister_session");
      assert.deepEqual(
        unregs.map((f) => [f.session, f.backendConnectionId]),
        [[uri, late]],
        "the backend retires the registration it no longer wants, naming its epoch",
      );
      const r = await probe(t, rt, uri, late, "ghost");
      assert.deepEqual([r.accepted, r.error], [false, "unknown session or route"], "the disposed session is not served on the late epoch");
      assert.equal(rt.inspect(uri), undefined);
      await goneOnHost(c, h, uri);
      c.close();
    },
    { tap: true },
  ));

test("a session disposed while its re-registration still reads its history sends no registration", () =>
  withBerth(
    async ({ h, rt, tap, cwd }) => {
      const t = tap!;
      const { c } = await AhpClient.init(h, ["ahp-root://"]);
      const uri = "ahp-session:/race-read";
      await newSession(c, uri, cwd);
      const { source, epoch } = registration(t, uri);
      // The refusal waits in the tap until the disposal follows it: both reach the backend in one write, so the
      // disposal is handled while the re-registration the refusal began reads the session's history.
      t.holdFrom("down", (f) => f.type === "event_rejected" && f.session === uri);
      rejectOn(t, uri, epoch);
      await until(() => t.held("down").length > 0, 10_000, "the refusal (held)");
      const disposed = c.request("disposeSession", { channel: uri });
      await until(() => t.held("down").some((f) => f.type === "provider_command" && f.command?.type === "dispose_session"), 10_000, "dispose_session (held)");
      t.release("down");
      assert.equal((await disposed).result, null, JSON.stringify((await disposed).error));
      await settled(rt);

      const regs = t.frames("up").filter((f) => f.type === "register_session" && f.hello.sourceId === source);
      assert.equal(regs.length, 1, "no registration of the disposed session (only the creation's claim)");
      assert.deepEqual(t.frames("up").filter((f) => f.type === "unregister_session"), [], "nothing to unregister");
      const r = await probe(t, rt, uri, epoch, "ghost");
      assert.deepEqual([r.accepted, r.error], [false, "unknown session or route"]);
      await goneOnHost(c, h, uri);
      c.close();
    },
    { tap: true },
  ));
