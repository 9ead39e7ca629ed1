/**
 * Durable host state in SQLite (better-sqlite3, WAL). Small rows, one table per concern.
 * Ordinary writes are queued and committed in one transaction per event-loop turn;
 * `flush()` commits immediately (used before anything that must be durable before a reply).
 */
import Database from "better-sqlite3";
import { randomUUID } from "node:crypto";

export interface SessionRow {
  uri: string;
  sourceId: string;
  provider: string;
  providerRoute: number; // 1 when created through a provider connection
  title: string;
  createdAt: string;
  modifiedAt: string;
  continuity: string;
  chatUri: string;
  lifecycle: string;
  extra: string; // JSON: model, thinkingLevel, interactivity, workingDirectories, creationError
}
export interface ChatRow {
  uri: string;
  sessionUri: string;
  title: string;
  /** JSON Turn[] of a chat stored before turns had their own rows ("[]" otherwise); read-only. */
  legacyTurns: string;
  /** The chat's turns, one JSON text per row, in order. */
  turns: string[];
  nextCursor: string | null;
  extra: string; // JSON: origin, workingDirectories, steeringMessage, queuedMessages
}
export interface CreationRow {
  sessionUri: string;
  provider: string;
  tokenHash: string;
  createdAt: string;
}

/** A v6 auxiliary resource: its URI, owning session, kind (`changeset`, `annotations`, `catalogue`) and JSON state. */
export interface ResourceRow {
  uri: string;
  sessionUri: string;
  kind: string;
  state: string;
}

export class HostStore {
  private db: Database.Database;
  private queue: Array<() => void> = [];
  private scheduled = false;
  private closed = false;
  private stmts;
  /**
   * Called when a write cannot be made durable (the store is closed, or a commit failed). The
   * queued writes are lost: memory and disk have diverged, and the owner must say so.
   */
  onFailure: (e: Error) => void = () => {};

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS sessions (
        uri TEXT PRIMARY KEY, source_id TEXT NOT NULL UNIQUE, provider TEXT NOT NULL, provider_route INTEGER NOT NULL,
        title TEXT NOT NULL, created_at TEXT NOT NULL, modified_at TEXT NOT NULL, continuity TEXT NOT NULL,
        chat_uri TEXT NOT NULL, lifecycle TEXT NOT NULL, extra TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS aliases (alias TEXT PRIMARY KEY, session_uri TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS chats (uri TEXT PRIMARY KEY, session_uri TEXT NOT NULL, title TEXT NOT NULL, turns TEXT NOT NULL, next_cursor TEXT);
      CREATE TABLE IF NOT EXISTS chat_turns (chat_uri TEXT NOT NULL, pos INTEGER NOT NULL, turn TEXT NOT NULL, PRIMARY KEY (chat_uri, pos));
      CREATE TABLE IF NOT EXISTS creations (session_uri TEXT PRIMARY KEY, provider TEXT NOT NULL, token_hash TEXT NOT NULL, created_at TEXT NOT NULL);
    `);
    // Chats gained an `extra` column (origin, working directories, pending messages).
    const chatCols = this.db.prepare(`PRAGMA table_info(chats)`).all() as Array<{ name: string }>;
    if (!chatCols.some((c) => c.name === "extra")) this.db.exec(`ALTER TABLE chats ADD COLUMN extra TEXT NOT NULL DEFAULT '{}'`);
    // v6 auxiliary resources (changesets, annotations, a session's changeset catalogue), one row each.
    this.db.exec(`CREATE TABLE IF NOT EXISTS resources (uri TEXT PRIMARY KEY, session_uri TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL)`);
    this.stmts = {
      upsertSession: this.db.prepare(
        `INSERT INTO sessions (uri, source_id, provider, provider_route, title, created_at, modified_at, continuity, chat_uri, lifecycle, extra)
         VALUES (@uri, @sourceId, @provider, @providerRoute, @title, @createdAt, @modifiedAt, @continuity, @chatUri, @lifecycle, @extra)
         ON CONFLICT(uri) DO UPDATE SET source_id=excluded.source_id, provider=excluded.provider, provider_route=excluded.provider_route,
           title=excluded.title, modified_at=excluded.modified_at, lifecycle=excluded.lifecycle, extra=excluded.extra`,
      ),
      deleteSession: this.db.prepare(`DELETE FROM sessions WHERE uri = ?`),
      deleteAliases: this.db.prepare(`DELETE FROM aliases WHERE session_uri = ?`),
      deleteChats: this.db.prepare(`DELETE FROM chats WHERE session_uri = ?`),
      deleteSessionTurns: this.db.prepare(`DELETE FROM chat_turns WHERE chat_uri IN (SELECT uri FROM chats WHERE session_uri = ?)`),
      putTurn: this.db.prepare(`INSERT OR REPLACE INTO chat_turns (chat_uri, pos, turn) VALUES (?, ?, ?)`),
      deleteTurns: this.db.prepare(`DELETE FROM chat_turns WHERE chat_uri = ?`),
      clearLegacyTurns: this.db.prepare(`UPDATE chats SET turns = '[]' WHERE uri = ?`),
      putAlias: this.db.prepare(`INSERT OR REPLACE INTO aliases (alias, session_uri) VALUES (?, ?)`),
      putChat: this.db.prepare(
        `INSERT INTO chats (uri, session_uri, title, turns, next_cursor, extra) VALUES (@uri, @sessionUri, @title, '[]', @nextCursor, @extra)
         ON CONFLICT(uri) DO UPDATE SET title=excluded.title, next_cursor=excluded.next_cursor, extra=excluded.extra`,
      ),
      deleteChat: this.db.prepare(`DELETE FROM chats WHERE uri = ?`),
      putCreation: this.db.prepare(`INSERT INTO creations (session_uri, provider, token_hash, created_at) VALUES (?, ?, ?, ?)`),
      deleteCreation: this.db.prepare(`DELETE FROM creations WHERE session_uri = ?`),
      putMeta: this.db.prepare(`INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)`),
      getMeta: this.db.prepare(`SELECT value FROM meta WHERE key = ?`),
      putResource: this.db.prepare(`INSERT OR REPLACE INTO resources (uri, session_uri, kind, state) VALUES (?, ?, ?, ?)`),
      deleteResources: this.db.prepare(`DELETE FROM resources WHERE session_uri = ?`),
    };
  }

  /** The persisted host identity, created on first use. */
  hostId(): string {
    const row = this.stmts.getMeta.get("hostId") as { value: string } | undefined;
    if (row) return row.value;
    const id = randomUUID();
    this.stmts.putMeta.run("hostId", id);
    return id;
  }

  loadSessions(): SessionRow[] {
    return (this.db.prepare(`SELECT * FROM sessions ORDER BY uri`).all() as Record<string, unknown>[]).map((r) => ({
      uri: r.uri as string,
      sourceId: r.source_id as string,
      provider: r.provider as string,
      providerRoute: r.provider_route as number,
      title: r.title as string,
      createdAt: r.created_at as string,
      modifiedAt: r.modified_at as string,
      continuity: r.continuity as string,
      chatUri: r.chat_uri as string,
      lifecycle: r.lifecycle as string,
      extra: r.extra as string,
    }));
  }
  loadAliases(): Array<{ alias: string; sessionUri: string }> {
    return (this.db.prepare(`SELECT alias, session_uri FROM aliases`).all() as Array<{ alias: string; session_uri: string }>).map((r) => ({
      alias: r.alias,
      sessionUri: r.session_uri,
    }));
  }
  loadChats(): ChatRow[] {
    const turns = new Map<string, string[]>();
    for (const r of this.db.prepare(`SELECT chat_uri, turn FROM chat_turns ORDER BY chat_uri, pos`).iterate() as Iterable<{ chat_uri: string; turn: string }>) {
      let list = turns.get(r.chat_uri);
      if (!list) turns.set(r.chat_uri, (list = []));
      list.push(r.turn);
    }
    return (this.db.prepare(`SELECT * FROM chats`).all() as Record<string, unknown>[]).map((r) => ({
      uri: r.uri as string,
      sessionUri: r.session_uri as string,
      title: r.title as string,
      legacyTurns: r.turns as string,
      turns: turns.get(r.uri as string) ?? [],
      nextCursor: (r.next_cursor as string | null) ?? null,
      extra: (r.extra as string | null) ?? "{}",
    }));
  }
  loadCreations(): CreationRow[] {
    return (this.db.prepare(`SELECT * FROM creations`).all() as Record<string, unknown>[]).map((r) => ({
      sessionUri: r.session_uri as string,
      provider: r.provider as string,
      tokenHash: r.token_hash as string,
      createdAt: r.created_at as string,
    }));
  }

  private enqueue(fn: () => void): void {
    if (this.closed) {
      this.onFailure(new Error("write after the store was closed"));
      return;
    }
    this.queue.push(fn);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Commit every queued write now, in one transaction. */
  flush(): void {
    this.scheduled = false;
    if (this.queue.length === 0 || this.closed) return;
    const q = this.queue;
    this.queue = [];
    this.active = { writes: q.length, startedMono: performance.now() };
    try {
      this.db.transaction(() => {
        for (const fn of q) fn();
      })();
    } catch (e) {
      this.onFailure(e instanceof Error ? e : new Error(String(e)));
    } finally {
      this.active = undefined;
    }
  }
  private active: { writes: number; startedMono: number } | undefined;

  /**
   * Aggregate write diagnostics (no keys, no content): writes queued for the next commit, and the
   * commit under way, if any, with its write count and age on a monotonic clock.
   */
  diagnostics(): { pendingWrites: number; activeCommit: { writes: number; ageMs: number } | null } {
    const a = this.active;
    return { pendingWrites: this.queue.length, activeCommit: a ? { writes: a.writes, ageMs: Math.max(0, Math.round(performance.now() - a.startedMono)) } : null };
  }

  putSession(row: SessionRow): void {
    this.enqueue(() => this.stmts.upsertSession.run(row));
  }
  removeSession(uri: string): void {
    this.enqueue(() => {
      this.stmts.deleteSession.run(uri);
      this.stmts.deleteSessionTurns.run(uri);
      this.stmts.deleteAliases.run(uri);
      this.stmts.deleteChats.run(uri);
      this.stmts.deleteCreation.run(uri);
      this.stmts.deleteResources.run(uri);
    });
  }
  putAlias(alias: string, sessionUri: string): void {
    this.enqueue(() => this.stmts.putAlias.run(alias, sessionUri));
  }
  /** Chat metadata only; turns are written by `appendTurns` / `replaceTurns`. */
  putChat(row: Omit<ChatRow, "turns" | "legacyTurns">): void {
    this.enqueue(() => this.stmts.putChat.run(row));
  }
  /** Write turns at positions `from`, `from + 1`, …: the cost is the new turns, not the transcript. */
  appendTurns(chatUri: string, from: number, turns: string[]): void {
    if (turns.length === 0) return;
    this.enqueue(() => {
      for (let i = 0; i < turns.length; i++) this.stmts.putTurn.run(chatUri, from + i, turns[i]);
    });
  }
  /** Rewrite a chat's whole turn list (older history loaded in front; a legacy chat migrated). */
  replaceTurns(chatUri: string, turns: string[]): void {
    this.enqueue(() => {
      this.stmts.deleteTurns.run(chatUri);
      for (let i = 0; i < turns.length; i++) this.stmts.putTurn.run(chatUri, i, turns[i]);
      this.stmts.clearLegacyTurns.run(chatUri);
    });
  }
  removeChat(uri: string): void {
    this.enqueue(() => {
      this.stmts.deleteChat.run(uri);
      this.stmts.deleteTurns.run(uri);
    });
  }
  /** A value of the `meta` table (small host-wide records), or undefined. */
  getMeta(key: string): string | undefined {
    const row = this.stmts.getMeta.get(key) as { value: string } | undefined;
    return row?.value;
  }
  /** Durable immediately (queued writes are committed first): for markers that must exist before a dispatch. */
  putMetaNow(key: string, value: string): void {
    this.flush();
    this.stmts.putMeta.run(key, value);
  }
  /**
   * Durable immediately, on its own (queued writes stay queued): for a host-wide record that may be
   * written in the middle of a state change, whose other writes must still commit together.
   */
  putMetaAlone(key: string, value: string): void {
    if (this.closed) throw new Error("write after the store was closed");
    this.stmts.putMeta.run(key, value);
  }
  /** Durable immediately: the reservation must exist before the provider is asked to launch. */
  reserveCreation(row: CreationRow): void {
    this.flush();
    this.stmts.putCreation.run(row.sessionUri, row.provider, row.tokenHash, row.createdAt);
  }
  dropCreation(sessionUri: string): void {
    this.enqueue(() => this.stmts.deleteCreation.run(sessionUri));
  }

  /** Every stored auxiliary resource (changeset, annotations, catalogue) with its owning session. */
  loadResources(): ResourceRow[] {
    return (this.db.prepare(`SELECT uri, session_uri, kind, state FROM resources`).all() as Array<Record<string, string>>).map((r) => ({
      uri: r.uri!,
      sessionUri: r.session_uri!,
      kind: r.kind!,
      state: r.state!,
    }));
  }
  /**
   * Store (replace) one resource's whole state with the next batch. `row` is read when the batch
   * commits, so a burst of changes to one resource writes its final state once (the caller queues
   * one such write per resource and batch); undefined writes nothing.
   */
  putResource(row: () => ResourceRow | undefined): void {
    this.enqueue(() => {
      const r = row();
      if (r) this.stmts.putResource.run(r.uri, r.sessionUri, r.kind, r.state);
    });
  }
  /** Forget every resource of a session. */
  removeResources(sessionUri: string): void {
    this.enqueue(() => this.stmts.deleteResources.run(sessionUri));
  }

  close(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    this.db.close();
  }
}
