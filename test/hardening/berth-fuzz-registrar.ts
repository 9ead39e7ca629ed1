/**
 * The registration side of the host, for the Berth backend fuzzer: a pool of served sessions whose
 * re-registrations it answers (at once, a batch or more later, or refused), whose epochs it tracks, and which it
 * refuses events of and disposes. Each frame is recorded in the order it is written, so the checks can tell what
 * the backend must have done: a registration answered after its session's accepted disposal is unregistered
 * (`unregister_session` naming that epoch), no other is, and nothing registers or publishes a session after its
 * disposal was accepted.
 *
 * "After": the backend forgets a session only once its disposal's registry write succeeded, and answers the
 * disposal after that, so an answer written once the host had read the acceptance is late for certain (unregistered
 * once); one written before the `dispose_session` is never late (never unregistered); one written in between may
 * have been read while the session was still served (then the acceptance's removal retires its route, and the
 * backend unregisters nothing) or after it was forgotten (unregistered once): either is right.
 */
import assert from "node:assert/strict";
import { pick, type Rand } from "../helpers/mutate.js";
import type { Json } from "../host/helpers.js";
import type { FakeHost } from "./berth-fake-host.js";

export interface PoolSession {
  uri: string;
  chat: string;
  source: string;
  /** Every epoch granted to it, oldest first; the last is its current one once the backend read its answer. */
  epochs: string[];
  /** A registration refused (`error`): it has no epoch and asks for none until the next connection. */
  stuck: boolean;
  /** A `dispose_session` for it was written. */
  disposing: boolean;
}

/** `seen`: how many frames the host had read from the backend when this was written. */
type Written = { kind: "answer"; uri: string; epoch: string; seen: number } | { kind: "dispose"; uri: string; commandId: string };

export const REFUSALS = ["event_rejected", "event_resync_required", "event_epoch_mismatch", "event_epoch_required"] as const;

export class Registrar {
  readonly pool: PoolSession[] = [];
  /** What the fuzzer wrote that the checks need, in write order. */
  private readonly written: Written[] = [];
  /** Registrations of pool sessions not answered yet (register_session frames). */
  private outstanding: Json[] = [];
  private scanned = 0;
  private epochs = 0;
  private disposes = 0;
  reRegistrations = 0;

  constructor(private readonly host: FakeHost) {}

  /** A session created (and its claim answered) outside: it joins the pool. */
  add(s: { uri: string; logical: string; chat: string }): void {
    const reg = this.host.frames.find((f) => f.type === "register_session" && (f.hello as Json).requestedSession === s.uri)!;
    this.pool.push({ uri: s.uri, chat: s.chat, source: (reg.hello as Json).sourceId as string, epochs: [s.logical], stuck: false, disposing: false });
  }

  /** Pool sessions that can still be refused, re-registered and disposed. */
  live(): PoolSession[] {
    return this.pool.filter((p) => !p.disposing && !p.stuck);
  }

  /** Lines answering the re-registrations the backend wrote so far (some now, some deferred, a few refused). */
  answers(r: Rand, all = false): string[] {
    for (; this.scanned < this.host.frames.length; this.scanned++) {
      const f = this.host.frames[this.scanned]!;
      if (f.type !== "register_session" || (f.hello as Json).requestedSession !== undefined) continue;
      if (this.bySource((f.hello as Json).sourceId) === undefined) continue;
      this.reRegistrations++;
      this.outstanding.push(f);
    }
    const lines: string[] = [];
    const later: Json[] = [];
    for (const f of this.outstanding) {
      const p = this.bySource((f.hello as Json).sourceId)!;
      const x = r();
      // A disposed session's answer is mostly deferred, so that many reach the backend after it read the disposal.
      if (!all && (x < 0.35 || (p.disposing && x < 0.8))) later.push(f);
      else if (!all && x < 0.4) {
        p.stuck = true;
        lines.push(JSON.stringify({ type: "error", requestId: f.requestId, code: "validation_error", message: "refused for the fuzz" }));
      } else {
        const epoch = `E${++this.epochs}`;
        p.epochs.push(epoch);
        p.stuck = false;
        lines.push(JSON.stringify({ type: "session_registered", requestId: f.requestId, session: p.uri, chat: p.chat, backendConnectionId: epoch }));
      }
    }
    this.outstanding = later;
    return lines;
  }

  /** A refusal of a pool session's event naming its current epoch, mostly; else a stale, unknown or no epoch. */
  refusal(r: Rand, k: number): Json | undefined {
    if (this.pool.length === 0) return undefined;
    const p = pick(r, this.pool);
    const x = r();
    const epoch = x < 0.6 ? p.epochs.at(-1) : x < 0.8 ? pick(r, p.epochs) : x < 0.9 ? `unknown-${k}` : undefined;
    const type = pick(r, REFUSALS);
    return { type, session: p.uri, sequence: 1 + (k % 7), ...(type === "event_resync_required" ? { expectedSequence: 1 } : {}), ...(epoch !== undefined ? { backendConnectionId: epoch } : {}), error: "refused by the fuzz" };
  }

  /** A disposal of a pool session, one whose registration awaits its answer when there is one. */
  dispose(r: Rand, instanceId: string): Json | undefined {
    const waiting = new Set(this.outstanding.map((f) => (f.hello as Json).sourceId));
    const live = this.live();
    const racing = live.filter((p) => waiting.has(p.source));
    const p = racing.length > 0 && r() < 0.8 ? pick(r, racing) : live.length > 0 ? pick(r, live) : undefined;
    if (p === undefined) return undefined;
    return { type: "provider_command", commandId: `d${++this.disposes}`, backendInstanceId: instanceId, command: { type: "dispose_session", session: p.uri, sourceId: p.source } };
  }

  /** Record a line about to be written (a mutated frame included, as the backend will read it). */
  wrote(f: Json | undefined): void {
    if (f === undefined) return;
    if (f.type === "session_registered" && typeof f.backendConnectionId === "string" && /^E\d+$/.test(f.backendConnectionId))
      this.written.push({ kind: "answer", uri: f.session as string, epoch: f.backendConnectionId, seen: this.host.frames.length });
    const cmd = f.command as Json | undefined;
    if (f.type === "provider_command" && typeof f.commandId === "string" && /^d\d+$/.test(f.commandId) && cmd?.type === "dispose_session") {
      const p = this.pool.find((x) => x.uri === cmd.session);
      if (p) p.disposing = true;
      this.written.push({ kind: "dispose", uri: cmd.session as string, commandId: f.commandId });
    }
  }

  /** Whether any registration answer is still to be written. */
  pending(): boolean {
    return this.outstanding.length > 0;
  }

  /** The checks (see the module contract); returns what was exercised. */
  check(seed: number, results: (id: string) => Json[]): { disposed: number; unregistered: number } {
    const frames = this.host.frames;
    const unregs = frames.filter((f) => f.type === "unregister_session");
    const disposedAt = new Map<string, number>(); // uri -> index in `written` of its accepted disposal
    this.written.forEach((w, i) => {
      if (w.kind === "dispose" && !disposedAt.has(w.uri) && results(w.commandId)[0]?.accepted === true) disposedAt.set(w.uri, i);
    });
    const acceptedAt = (i: number): number => frames.findIndex((f) => f.type === "command_result" && f.commandId === (this.written[i] as { commandId: string }).commandId);
    let matched = 0;
    this.written.forEach((w, i) => {
      if (w.kind !== "answer") return;
      const d = disposedAt.get(w.uri);
      const after = d !== undefined && d < i;
      const late = after && acceptedAt(d) < w.seen;
      const got = unregs.filter((f) => f.backendConnectionId === w.epoch);
      const what = late ? "after the host read its disposal's acceptance" : after ? "while its disposal was being written" : "before its disposal";
      if (after && !late) assert.ok(got.length <= 1, `seed ${seed}: epoch ${w.epoch} of ${w.uri} answered ${what}: unregistered ${got.length} times`);
      else assert.equal(got.length, late ? 1 : 0, `seed ${seed}: epoch ${w.epoch} of ${w.uri} answered ${what}: unregistered ${got.length} times`);
      if (got.length > 0) assert.equal(got[0]!.session, w.uri, `seed ${seed}: unregister_session names the session`);
      matched += got.length;
    });
    assert.equal(unregs.length, matched, `seed ${seed}: only registrations answered after a disposal are unregistered`);
    for (const [uri, i] of disposedAt) {
      const p = this.pool.find((x) => x.uri === uri)!;
      const w = this.written[i] as { commandId: string };
      const at = frames.findIndex((f) => f.type === "command_result" && f.commandId === w.commandId);
      const after = frames.slice(at + 1);
      assert.deepEqual(after.filter((f) => f.type === "register_session" && (f.hello as Json).sourceId === p.source), [], `seed ${seed}: ${uri} registered after its disposal`);
      assert.deepEqual(after.filter((f) => f.type === "sequenced_event" && f.session === uri).slice(0, 1), [], `seed ${seed}: ${uri} published after its disposal`);
    }
    return { disposed: disposedAt.size, unregistered: unregs.length };
  }

  private bySource(source: unknown): PoolSession | undefined {
    return this.pool.find((p) => p.source === source);
  }
}
