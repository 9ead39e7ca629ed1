/**
 * The host-wide action sequencer: one `serverSeq` authority, the bounded replay ring used by
 * `reconnect`, channel subscriptions and fan-out. Contracts:
 *  - an envelope is serialized BEFORE anything is stored or reduced: an action that cannot be
 *    serialized throws out of `publish` with no sequence number consumed, nothing reduced and
 *    nothing in the replay ring (so it can never poison a later `reconnect`);
 *  - published envelopes are immutable: the ring keeps the serialized text, never the objects
 *    the reducer goes on to mutate, so a replay shows exactly what was sent live;
 *  - every envelope gets the next `serverSeq`, is reduced (unless rejected) before it is sent,
 *    and is sent to each subscriber in sequence order;
 *  - a fanned-out message is serialized once and framed as a WebSocket frame at most once, onto
 *    the shared tape every client's socket write takes its slices from (fanout.ts);
 *  - the replay ring holds at most REPLAY_LIMIT envelopes and REPLAY_BYTES_LIMIT bytes of
 *    envelope text; `replaySince` answers null when the requested gap is older than the ring.
 */
import { ROOT } from "./ahp-schema.js";
import { filterKey } from "./ahp-version.js";
import { FrameTape } from "./fanout.js";
import { REPLAY_BYTES_LIMIT, REPLAY_LIMIT, type Envelope, type Json, type Origin, type Subscriber } from "./model.js";

/** An `action` notification is these bytes around the envelope's JSON. */
const ACTION_HEAD = Buffer.from('{"jsonrpc":"2.0","method":"action","params":');
const ACTION_TAIL = Buffer.from("}");

interface Recorded {
  serverSeq: number;
  channel: string;
  type: string;
  /** The envelope exactly as published (JSON). */
  text: string;
}

export class ActionLog {
  serverSeq = 0;
  private ring: Recorded[] = [];
  private head = 0; // index of the oldest retained entry
  private ringBytes = 0;
  readonly subs = new Map<string, Set<Subscriber>>();
  /** Where fanned-out envelopes are framed, once each (fanout.ts). */
  private readonly tape = new FrameTape();

  /** @param reduce applies an accepted action to the host model before fan-out. */
  constructor(private readonly reduce: (channel: string, action: Json) => void) {}

  /** Sequence, reduce, record and fan out one action. Throws (consuming nothing) when it cannot be serialized. */
  publish(channel: string, action: Json, origin?: Origin, rejectionReason?: string): Envelope {
    const env: Envelope = { channel, action, serverSeq: this.serverSeq + 1 };
    if (origin) env.origin = origin;
    if (rejectionReason !== undefined) env.rejectionReason = rejectionReason;
    const text = JSON.stringify(env); // first: a throw here leaves no trace
    if (rejectionReason === undefined) this.reduce(channel, action);
    this.serverSeq = env.serverSeq;
    const type = filterKey(action);
    this.record({ serverSeq: env.serverSeq, channel, type, text });
    const set = this.subs.get(channel);
    if (set && set.size > 0) {
      const tape = this.tape;
      let framed = false;
      for (const sub of set) {
        if (!sub.accepts(type)) continue;
        if (sub.queueFrame) {
          if (!framed) {
            tape.frame(ACTION_HEAD, text, ACTION_TAIL);
            framed = true;
          }
          sub.queueFrame(tape.lastChunk, tape.lastStart, tape.lastEnd);
        } else sub.sendRaw(`{"jsonrpc":"2.0","method":"action","params":${text}}`);
      }
    }
    return env;
  }

  private record(r: Recorded): void {
    this.ring.push(r);
    this.ringBytes += r.text.length;
    while (this.ring.length - this.head > REPLAY_LIMIT || (this.ringBytes > REPLAY_BYTES_LIMIT && this.ring.length - this.head > 1)) {
      this.ringBytes -= this.ring[this.head]!.text.length;
      this.ring[this.head++] = undefined as unknown as Recorded;
    }
    if (this.head > 4096 && this.head * 2 > this.ring.length) {
      this.ring = this.ring.slice(this.head);
      this.head = 0;
    }
  }

  /** Bytes (UTF-16 code units) of envelope text the replay ring holds now. */
  get replayBytes(): number {
    return this.ringBytes;
  }

  /** Send an ephemeral (unsequenced, never replayed) notification to root subscribers. */
  rootNotify(method: string, params: Json): void {
    const set = this.subs.get(ROOT);
    if (!set || set.size === 0) return;
    const text = JSON.stringify({ jsonrpc: "2.0", method, params });
    for (const sub of set) sub.sendRaw(text);
  }

  /**
   * Fresh copies of the envelopes after `since` for the given channels (those `accept` admits),
   * or null when the gap is older than the ring.
   */
  replaySince(since: number, channels: Set<string>, accept: (type: string) => boolean = () => true): Envelope[] | null {
    if (since >= this.serverSeq) return [];
    const n = this.ring.length - this.head;
    const oldest = n === 0 ? this.serverSeq + 1 : this.ring[this.head]!.serverSeq;
    if (since + 1 < oldest) return null;
    const out: Envelope[] = [];
    for (let i = this.head; i < this.ring.length; i++) {
      const e = this.ring[i]!;
      if (e.serverSeq > since && channels.has(e.channel) && accept(e.type)) out.push(JSON.parse(e.text) as Envelope);
    }
    return out;
  }

  subscribe(channel: string, sub: Subscriber): void {
    let set = this.subs.get(channel);
    if (!set) this.subs.set(channel, (set = new Set()));
    set.add(sub);
  }
  unsubscribe(channel: string, sub: Subscriber): void {
    const set = this.subs.get(channel);
    if (set) {
      set.delete(sub);
      if (set.size === 0) this.subs.delete(channel);
    }
  }
  /** Drop every subscription to a channel that no longer exists. */
  dropChannel(channel: string): void {
    this.subs.delete(channel);
  }
}
