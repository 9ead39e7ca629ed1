/**
 * When channels were removed, for `reconnect`: sessions, chats, and a session's changeset and annotations channels
 * (removed with it). A session URI comes back when its source registers again after a disposal, its resource URIs
 * when that source sends them again, and a chat URI when a client creates a chat under it again: a client that was
 * away from before the removal holds the earlier channel's state, onto which a replay of the new one's envelopes
 * must not be applied. Contracts:
 *  - `channelRemoved` records the serverSeq at the removal (the last envelope published before it);
 *  - `removedSince(uri, since)` is true when a client that saw up to `since` may not have seen that removal;
 *  - only removals the replay ring may still span are kept (newer than serverSeq - REPLAY_LIMIT): a gap older than
 *    that is answered with snapshots anyway.
 */
import { REPLAY_LIMIT } from "./model.js";

interface Sequenced {
  readonly serverSeq: number;
}
const removals = new WeakMap<Sequenced, Map<string, number>>();

export function channelRemoved(st: Sequenced, uri: string): void {
  let m = removals.get(st);
  if (!m) removals.set(st, (m = new Map<string, number>()));
  m.delete(uri); // re-inserted as the newest: the map stays in removal order
  m.set(uri, st.serverSeq);
  for (const [u, seq] of m) {
    if (seq >= st.serverSeq - REPLAY_LIMIT) break;
    m.delete(u);
  }
}

export function removedSince(st: Sequenced, uri: string, since: number): boolean {
  const seq = removals.get(st)?.get(uri);
  return seq !== undefined && seq >= since;
}

/** How many removals are remembered now (for inspection and tests). */
export function rememberedRemovals(st: Sequenced): number {
  return removals.get(st)?.size ?? 0;
}
