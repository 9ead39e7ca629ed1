/**
 * The host-wide action sequencer: one `serverSeq` authority, the bounded replay ring used by
 * `reconnect`, channel subscriptions and fan-out. Contracts:
 *  - every envelope gets the next `serverSeq`, is reduced (unless rejected) before it is sent,
 *    and is sent to each subscriber in sequence order;
 *  - a fanned-out message is serialized once and framed as a WebSocket frame at most once;
 *  - the replay ring holds the newest REPLAY_LIMIT envelopes; `replaySince` answers null when
 *    the requested gap is older than the ring.
 */
import { ROOT } from "./ahp-schema.js";
import { wsTextFrame } from "../../transport/host-wsframe.js";
import { REPLAY_LIMIT, type Envelope, type Json, type Origin, type Subscriber } from "./model.js";

export class ActionLog {
  serverSeq = 0;
  private replay: Envelope[] = [];
  private replayStart = 0; // index of the oldest retained entry (ring)
  readonly subs = new Map<string, Set<Subscriber>>();

  /** @param reduce applies an accepted action to the host model before fan-out. */
  constructor(private readonly reduce: (channel: string, action: Json) => void) {}

  /** Sequence, reduce, record and fan out one action. */
  publish(channel: string, action: Json, origin?: Origin, rejectionReason?: string): Envelope {
    const env: Envelope = { channel, action, serverSeq: ++this.serverSeq };
    if (origin) env.origin = origin;
    if (rejectionReason !== undefined) env.rejectionReason = rejectionReason;
    else this.reduce(channel, action);
    if (this.replay.length < REPLAY_LIMIT) this.replay.push(env);
    else {
      this.replay[this.replayStart] = env;
      this.replayStart = (this.replayStart + 1) % REPLAY_LIMIT;
    }
    const set = this.subs.get(channel);
    if (set && set.size > 0) {
      const text = `{"jsonrpc":"2.0","method":"action","params":${JSON.stringify(env)}}`;
      const type = action.type as string;
      let frame: Buffer | undefined;
      for (const sub of set) {
        if (!sub.accepts(type)) continue;
        if (sub.sendFrame) sub.sendFrame((frame ??= wsTextFrame(text)), text);
        else sub.sendRaw(text);
      }
    }
    return env;
  }

  /** Send an ephemeral (unsequenced, never replayed) notification to root subscribers. */
  rootNotify(method: string, params: Json): void {
    const set = this.subs.get(ROOT);
    if (!set || set.size === 0) return;
    const text = JSON.stringify({ jsonrpc: "2.0", method, params });
    for (const sub of set) sub.sendRaw(text);
  }

  /** Replay envelopes after `since` for the given channels, or null when the gap is too old. */
  replaySince(since: number, channels: Set<string>): Envelope[] | null {
    const n = this.replay.length;
    if (since >= this.serverSeq) return [];
    const oldest = n === 0 ? this.serverSeq + 1 : this.replay[this.replayStart]!.serverSeq;
    if (since + 1 < oldest) return null;
    const out: Envelope[] = [];
    for (let i = 0; i < n; i++) {
      const e = this.replay[(this.replayStart + i) % n]!;
      if (e.serverSeq > since && channels.has(e.channel)) out.push(e);
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
