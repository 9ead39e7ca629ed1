/**
 * The host-wide action sequencer: one `serverSeq` authority, the bounded replay ring used by
 * `reconnect`, channel subscriptions and fan-out. Contracts:
 *  - an envelope is serialized BEFORE anything is stored or reduced: an action that cannot be
 *    serialized throws out of `publish` with no sequence number consumed, nothing reduced and
 *    nothing in the replay ring (so it can never poison a later `reconnect`);
 *  - published envelopes are immutable: the ring keeps the serialized text (its UTF-8 bytes,
 *    inside the envelope's frame on the tape), never the objects the reducer goes on to mutate,
 *    so a replay shows exactly what was sent live;
 *  - every envelope gets the next `serverSeq`, is reduced (unless rejected) before it is sent,
 *    and is sent to each subscriber in sequence order;
 *  - an envelope is serialized once and framed once, as an `action` notification, onto the
 *    shared tape every client's socket write takes its slices from (fanout.ts);
 *  - the replay ring holds at most REPLAY_LIMIT envelopes and REPLAY_BYTES_LIMIT bytes of
 *    envelope text; `replaySince` answers null when the requested gap is older than the ring;
 *  - with `continueFrom`, numbers never repeat across host runs: a run starts at the durable
 *    ceiling the previous run reserved, and a number at or past the ceiling is published only
 *    after a new ceiling was reserved (so a client's `lastSeenServerSeq` from an earlier run is
 *    always older than this run's ring, and its `reconnect` gets snapshots, never another run's
 *    envelopes).
 */
import { ROOT } from "./ahp-constants.js";
import { filterKey } from "./ahp-version.js";
import { FrameTape } from "./fanout.js";
import { REPLAY_BYTES_LIMIT, REPLAY_LIMIT, type Envelope, type Json, type Origin, type Subscriber } from "./model.js";

/** An `action` notification is these bytes around the envelope's JSON. */
const ACTION_HEAD = Buffer.from('{"jsonrpc":"2.0","method":"action","params":');
const ACTION_TAIL = Buffer.from("}");

export class ActionLog {
  serverSeq = 0;
  // The replay ring, a circular buffer of REPLAY_LIMIT entries: `head` is the oldest of `count`.
  // Entry i's envelope text is bytes [textStart[i], textEnd[i]) of tape chunk chunks[i] (UTF-8),
  // exactly as published; textLen[i] is its length in UTF-16 code units (what the byte bound counts).
  private readonly seqs = new Float64Array(REPLAY_LIMIT);
  private readonly textLen = new Float64Array(REPLAY_LIMIT);
  private readonly textStart = new Uint32Array(REPLAY_LIMIT);
  private readonly textEnd = new Uint32Array(REPLAY_LIMIT);
  private readonly chunks = new Array<Buffer | undefined>(REPLAY_LIMIT).fill(undefined);
  private readonly channels = new Array<string>(REPLAY_LIMIT).fill("");
  private readonly types = new Array<string>(REPLAY_LIMIT).fill("");
  private head = 0;
  private count = 0;
  private ringBytes = 0;
  readonly subs = new Map<string, Set<Subscriber>>();
  /** Where every envelope is framed, once, as an `action` notification (fanout.ts). */
  private readonly tape = new FrameTape();

  /** Numbers below this may be published without reserving more (see `continueFrom`). */
  private seqCeiling = Infinity;
  private reserveSeqs: (next: number) => number = () => Infinity;

  /** @param reduce applies an accepted action to the host model before fan-out. */
  constructor(private readonly reduce: (channel: string, action: Json) => void) {}

  /**
   * Continue the numbering of an earlier run: start after `ceiling` (every number that run
   * published is below it) and call `reserve(next)` before publishing a number at or past the
   * current ceiling; it must make a new ceiling above `next` durable and return it.
   */
  continueFrom(ceiling: number, reserve: (next: number) => number): void {
    this.serverSeq = ceiling;
    this.seqCeiling = ceiling;
    this.reserveSeqs = reserve;
  }

  /** Sequence, reduce, record and fan out one action. Throws (consuming nothing) when it cannot be serialized. */
  publish(channel: string, action: Json, origin?: Origin, rejectionReason?: string): Envelope {
    const env: Envelope = { channel, action, serverSeq: this.serverSeq + 1 };
    if (origin) env.origin = origin;
    if (rejectionReason !== undefined) env.rejectionReason = rejectionReason;
    const text = JSON.stringify(env); // first: a throw here leaves no trace
    if (env.serverSeq >= this.seqCeiling) this.seqCeiling = this.reserveSeqs(env.serverSeq);
    if (rejectionReason === undefined) this.reduce(channel, action);
    this.serverSeq = env.serverSeq;
    const type = filterKey(action);
    // Framed once: the ring keeps the envelope's bytes inside the frame, and subscribers get the frame.
    const tape = this.tape;
    tape.frame(ACTION_HEAD, text, ACTION_TAIL);
    this.record(env.serverSeq, channel, type, text.length, tape.lastChunk, tape.lastStart + tape.lastHeader + ACTION_HEAD.length, tape.lastEnd - ACTION_TAIL.length);
    const set = this.subs.get(channel);
    if (set && set.size > 0) {
      for (const sub of set) {
        if (!sub.accepts(type)) continue;
        if (sub.queueFrame) sub.queueFrame(tape.lastChunk, tape.lastStart, tape.lastEnd);
        else sub.sendRaw(`{"jsonrpc":"2.0","method":"action","params":${text}}`);
      }
    }
    return env;
  }

  private record(seq: number, channel: string, type: string, len: number, chunk: Buffer, start: number, end: number): void {
    while (this.count > 0 && (this.count >= REPLAY_LIMIT || this.ringBytes + len > REPLAY_BYTES_LIMIT)) this.dropOldest();
    const i = (this.head + this.count) % REPLAY_LIMIT;
    this.seqs[i] = seq;
    this.textLen[i] = len;
    this.textStart[i] = start;
    this.textEnd[i] = end;
    this.chunks[i] = chunk;
    this.channels[i] = channel;
    this.types[i] = type;
    this.count++;
    this.ringBytes += len;
  }
  private dropOldest(): void {
    const i = this.head;
    this.ringBytes -= this.textLen[i]!;
    this.chunks[i] = undefined; // its tape chunk can go once nothing else holds it
    this.head = (i + 1) % REPLAY_LIMIT;
    this.count--;
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
    const oldest = this.count === 0 ? this.serverSeq + 1 : this.seqs[this.head]!;
    if (since + 1 < oldest) return null;
    const out: Envelope[] = [];
    for (let k = 0; k < this.count; k++) {
      const i = (this.head + k) % REPLAY_LIMIT;
      if (this.seqs[i]! > since && channels.has(this.channels[i]!) && accept(this.types[i]!))
        out.push(JSON.parse(this.chunks[i]!.toString("utf8", this.textStart[i], this.textEnd[i])) as Envelope);
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
  /** Drop every subscription to a channel that no longer exists; each subscriber is told it no longer holds it. */
  dropChannel(channel: string): void {
    const set = this.subs.get(channel);
    this.subs.delete(channel);
    for (const sub of set ?? []) sub.channelRemoved?.(channel);
  }
}

/** The `meta` key of the durable serverSeq ceiling, and how many numbers one write reserves. */
const SEQ_CEILING_KEY = "serverSeqCeiling";
const SEQ_BLOCK = 65_536;

/**
 * `serverSeq` continues across host runs (`continueFrom`): this run starts at the ceiling the previous one made
 * durable in `meta`, and reserves SEQ_BLOCK numbers at a time, so a client reconnecting with a number from an earlier
 * run is answered with snapshots. A ceiling that cannot be written poisons the state (`poison`).
 */
export function continueAcrossRuns(
  actions: ActionLog,
  meta: { getMeta(key: string): string | undefined; putMetaAlone(key: string, value: string): void },
  log: (line: string) => void,
  poison: (reason: string) => void,
): void {
  const raw = meta.getMeta(SEQ_CEILING_KEY);
  const stored = raw === undefined ? 0 : Number(raw);
  if (!Number.isSafeInteger(stored) || stored < 0) log(`${SEQ_CEILING_KEY} ${JSON.stringify(raw).slice(0, 64)} is unreadable; numbering starts at 0`);
  actions.continueFrom(Number.isSafeInteger(stored) && stored > 0 ? stored : 0, (next) => {
    const ceiling = next + SEQ_BLOCK;
    try {
      meta.putMetaAlone(SEQ_CEILING_KEY, String(ceiling));
    } catch (e) {
      poison(`serverSeq ceiling not durable: ${e instanceof Error ? e.message : String(e)}`);
    }
    return ceiling;
  });
}
