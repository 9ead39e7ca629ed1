/**
 * The sessions the Berth backend serves, and their registry: the registry's (created through AHP, or given chats
 * or configuration; `registered`), the Berth store's others (dormant until opened), and the disposed ones (kept in
 * the registry, marked, so their Berth sessions are not listed again).
 */
import type { SessionHub } from "../../runtime/session/index.js";
import { BerthRegistry, type BerthRegistryEntry as RegistryEntry } from "../../store/host/berth-registry.js";
import type { Lane } from "./chats.js";

export interface LiveSession {
  entry: RegistryEntry;
  /** In the registry file (created through AHP, or given chats/config), or only in the Berth store (dormant). */
  registered: boolean;
  uri?: string;
  /** The host's id for this session in the current registration; undefined once that registration is gone. */
  logicalId?: string | undefined;
  /** The host's URI of the primary chat (from `session_registered`). */
  primaryChat?: string;
  seq: number;
  /** Disposed through the host (`dispose_session`): no longer served, never registered again. */
  disposed?: true;
  /**
   * Its disposal's registry write is in flight (settles with it, never rejects): registry snapshots taken meanwhile
   * write it as disposed, while it is still served (it is forgotten only once that write succeeded, `disposed` set
   * before this settles; a failed write leaves it served). A registration waits for it before being sent.
   */
  disposing?: Promise<void>;
  /** The primary chat (the session's own Berth session). */
  primary: Lane;
  /** Further chats by AHP chat URI. */
  chats: Map<string, Lane>;
}

/** A session as first known (no registration yet), with its chats from the registry entry. */
export function liveSession(entry: RegistryEntry, registered: boolean): LiveSession {
  const chats = new Map<string, Lane>();
  for (const c of entry.chats ?? []) if (c.disposed !== true) chats.set(c.uri, { sessionId: c.sessionId, chatUri: c.uri, held: null, ...(c.selection !== undefined ? { selection: c.selection } : {}) });
  return { entry, registered, seq: 0, primary: { sessionId: entry.sessionId, held: null }, chats };
}

/** A session's registry entry as a snapshot writes it: a chat whose disposal is being written is marked disposed. */
function entryOf(s: LiveSession): RegistryEntry {
  const pending = [...s.chats].filter(([, l]) => l.disposing === true).map(([uri]) => uri);
  if (pending.length === 0) return s.entry;
  return { ...s.entry, chats: (s.entry.chats ?? []).map((c) => (pending.includes(c.uri) ? { ...c, disposed: true } : c)) };
}

/** A session's registry entry once disposed: its creation claim (token) dropped, marked. */
function disposedEntry(s: LiveSession): RegistryEntry {
  const { creationToken: _t, requestedSession: _r, ...entry } = entryOf(s);
  return { ...entry, disposed: true };
}

/** Every chat of a session, the primary first. */
export function lanesOf(s: LiveSession): Lane[] {
  return [s.primary, ...s.chats.values()];
}

/**
 * The refusal of a command whose registry write failed: the write's error (bounded), what the refusal left as it
 * was (`kept`), and the fix, then what to do again (`retry`).
 */
export function registryWriteFailed(e: unknown, registryPath: string, kept: string, retry: string): string {
  const cause = (e instanceof Error ? e.message : String(e)).slice(0, 1024);
  return `registry write failed (${cause}); ${kept}; make ${registryPath} a writable file (its directory writable, nothing else at that path), then ${retry}`;
}

export class SessionTable {
  /** By Berth session id (of the primary chat). */
  readonly sessions = new Map<string, LiveSession>();
  /** By the host's session URI (of the current registration). */
  readonly byUri = new Map<string, LiveSession>();
  /** Disposed sessions (kept in the registry so their Berth sessions are not listed again). */
  readonly disposed = new Map<string, RegistryEntry>();
  private readonly registry: BerthRegistry;

  constructor(registryPath: string) {
    this.registry = new BerthRegistry(registryPath);
    for (const e of this.registry.load()) {
      if (e.disposed === true) this.disposed.set(e.sessionId, e);
      else this.sessions.set(e.sessionId, liveSession(e, true));
    }
  }

  /** Durably rewrite the registry (serialized; resolves once this version is on disk). */
  save(): Promise<void> {
    const live = [...this.sessions.values()];
    return this.registry.save([
      ...live.filter((s) => s.registered && s.disposing === undefined).map(entryOf),
      ...live.filter((s) => s.disposing !== undefined).map(disposedEntry),
      ...this.disposed.values(),
    ]);
  }

  /**
   * The session served at `uri`: routed by its registration, or one whose creation the host admitted and whose
   * claim (`requestedSession`) it has not answered yet. (A disposal may name either: spec, "for a session created
   * through that provider connection"; the host lists a creating session, and its clients may dispose it.)
   */
  find(uri: string): LiveSession | undefined {
    const routed = this.byUri.get(uri);
    if (routed !== undefined) return routed;
    for (const s of this.sessions.values()) if (s.uri === undefined && s.entry.creationToken !== undefined && s.entry.requestedSession === uri) return s;
    return undefined;
  }

  /** Resolves once every registry write begun so far has finished. */
  settled(): Promise<void> {
    return this.registry.settled();
  }

  /**
   * Dispose a session served at `uri`, durably: the registry is written with the session marked disposed, and only
   * once that write is on disk is the session forgotten here (out of the table and its routes, marked `disposed`).
   * A failed write rejects with its error and leaves the session as it was, served.
   */
  async dispose(s: LiveSession, uri: string): Promise<void> {
    let settle!: () => void;
    await this.writeDisposal(
      () => (s.disposing = new Promise<void>((resolve) => (settle = resolve))),
      () => {
        delete s.disposing;
        settle();
      },
      () => {
        this.sessions.delete(s.entry.sessionId);
        if (this.byUri.get(uri) === s) this.byUri.delete(uri);
        s.logicalId = undefined;
        s.disposed = true;
        this.disposed.set(s.entry.sessionId, disposedEntry(s));
      },
    );
  }

  /**
   * Dispose chat `uri` (`lane`) of session `s`, durably: the registry is written with the chat marked disposed, and
   * only once that write is on disk is the chat forgotten here (out of `s.chats`, marked in `s.entry.chats`; its
   * Berth session file is kept, and the mark keeps it from being listed as a session of its own). A failed write
   * rejects with its error and leaves the chat as it was, served (its runtime, a running turn).
   */
  async disposeChat(s: LiveSession, lane: Lane, uri: string): Promise<void> {
    await this.writeDisposal(
      () => (lane.disposing = true),
      () => delete lane.disposing,
      () => {
        if (s.chats.get(uri) === lane) s.chats.delete(uri);
        s.entry.chats = (s.entry.chats ?? []).map((c) => (c.uri === uri ? { ...c, disposed: true } : c));
      },
    );
  }

  /**
   * Write the registry with a disposal pending (`mark`: snapshots taken meanwhile write it as disposed, while it is
   * still served). On success `forget` runs, then `unmark`; on failure `unmark` runs and the error is rethrown. (A
   * snapshot another write took meanwhile may have put the mark on disk: the registry is then rewritten once more,
   * best effort, so the file follows what is served.)
   */
  private async writeDisposal(mark: () => void, unmark: () => void, forget: () => void): Promise<void> {
    mark();
    try {
      await this.save();
    } catch (e) {
      unmark();
      void this.save().catch(() => undefined);
      throw e;
    }
    forget();
    unmark();
  }

  /** Adds the Berth store's sessions this backend does not know yet (dormant until opened). */
  async discover(hub: SessionHub): Promise<LiveSession[]> {
    const found: LiveSession[] = [];
    const chatIds = new Set<string>();
    for (const e of [...[...this.sessions.values()].map((s) => s.entry), ...this.disposed.values()]) for (const c of e.chats ?? []) chatIds.add(c.sessionId);
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      let listed;
      try {
        listed = await hub.list(after, 200);
      } catch {
        break;
      }
      for (const e of listed.sessions) {
        if (this.sessions.has(e.sessionId) || this.disposed.has(e.sessionId) || chatIds.has(e.sessionId)) continue;
        // The working directory is read from the session's header when it is first prompted (`resolveCwd`).
        const s = liveSession({ sessionId: e.sessionId, cwd: "", title: e.title ?? "New Session" }, false);
        this.sessions.set(e.sessionId, s);
        found.push(s);
      }
      if (!listed.truncated || listed.nextAfter === null) break;
      after = listed.nextAfter;
    }
    return found;
  }
}
