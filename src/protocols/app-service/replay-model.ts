/**
 * The replay projection's data model: items, the `Projection` interface and the two in-memory implementations
 * (a plain list, and a list composed on a kept prefix of another projection after an extension). The sidecar-backed
 * implementation lives in replay-codec.ts. Projections are immutable once built. See replay.ts for the contract.
 */
import type { ResumePoint, TerminalStatus } from "../../store/sessions/index.js";

export type ReplayItem =
  | { kind: "message"; role: "user" | "assistant"; text: string; part: number; last_part: boolean }
  | { kind: "summary"; text: string; part: number; last_part: boolean }
  | { kind: "terminal"; status: TerminalStatus };

/**
 * A projection: `count` items (`item(i)`, 0 ≤ i < count) and the prefix hashes behind their cursors. Immutable.
 * `items` materializes every item (tests, diagnostics); pages use `item(i)`, which a sidecar-backed projection
 * decodes on demand.
 */
export interface Projection {
  readonly sessionId: string;
  readonly count: number;
  item(i: number): ReplayItem;
  readonly items: ReplayItem[];
  /** prefix[2i], prefix[2i+1]: the two hash lanes after the first i items (length 2 * (count + 1)). */
  readonly prefix: Uint32Array;
  readonly gap: boolean;
  /** What `extendProjection` needs; null when the window cannot be continued (torn, record-bounded). */
  readonly state: ProjectionState | null;
}

/** Where the window read stopped, and the turns as far as later records can still change the projection. */
export interface ProjectionState {
  point: ResumePoint;
  /** IDs of the projected turns before `tail` (a later record for one of them needs a full projection). */
  closed: string[];
  /** The last projected turn with its raw texts, or null when no turn is projected. */
  tail: TailTurn | null;
}

export interface TailTurn {
  id: string;
  /** Index of the turn's first item. */
  firstItem: number;
  users: string[];
  /** [message_id, text] in first-appearance order. */
  assistant: Array<[string, string]>;
  terminal: { status: TerminalStatus; text: string } | null;
}

export class ListProjection implements Projection {
  constructor(
    readonly sessionId: string,
    readonly items: ReplayItem[],
    readonly prefix: Uint32Array,
    readonly gap: boolean,
    readonly state: ProjectionState | null,
  ) {}
  get count(): number {
    return this.items.length;
  }
  item(i: number): ReplayItem {
    return this.items[i] as ReplayItem;
  }
}

/** The first `cut` items of `root`, then `extra`. Built by `compose`, so roots are never composed themselves. */
export class ComposedProjection implements Projection {
  private all: ReplayItem[] | null = null;
  constructor(
    readonly sessionId: string,
    readonly root: Projection,
    readonly cut: number,
    readonly extra: ReplayItem[],
    readonly prefix: Uint32Array,
    readonly gap: boolean,
    readonly state: ProjectionState | null,
  ) {}
  get count(): number {
    return this.cut + this.extra.length;
  }
  item(i: number): ReplayItem {
    return i < this.cut ? this.root.item(i) : (this.extra[i - this.cut] as ReplayItem);
  }
  get items(): ReplayItem[] {
    return (this.all ??= Array.from({ length: this.count }, (_, i) => this.item(i)));
  }
}

export function compose(base: Projection, cut: number, extra: ReplayItem[], prefix: Uint32Array, gap: boolean, state: ProjectionState | null): Projection {
  if (!(base instanceof ComposedProjection)) return new ComposedProjection(base.sessionId, base, cut, extra, prefix, gap, state);
  const kept = cut >= base.cut ? base.extra.slice(0, cut - base.cut).concat(extra) : extra;
  return new ComposedProjection(base.sessionId, base.root, Math.min(cut, base.cut), kept, prefix, gap, state);
}
