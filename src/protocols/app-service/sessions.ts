/**
 * `session.list`, `session.create`, `session.open`, `session.replay`, `session.close` (app-service v1 §Sessions).
 * Wire projection only: validation order, error mapping and payload shapes. Storage, leases and attachments
 * live in src/store/sessions; the replay projection in replay.ts.
 *
 * Check order per request: envelope (dispatcher) → payload shape (`invalid_payload`) → limits (`limit_exceeded`)
 * → session ID / list continuation validation (`invalid_session_id`) → state (`session_busy`, `session_unavailable`,
 * `limit_exceeded` for the attachment cap and scan budget).
 */
import { utf8Length } from "../../core/utf8.js";
import type { ErrorCode } from "./errors.js";
import { LIMITS } from "./limits.js";
import {
  DEFAULT_WINDOW,
  SessionError,
  storageProblemOf,
  isValidSessionId,
  sameVersion,
  type FileVersion,
  type ResumePoint,
  type SessionManager,
} from "../../store/sessions/index.js";
import { emptyPayload, onlyKeys, type MethodDescriptor, type MethodFamily, type Outcome, type ParseResult } from "./descriptor.js";
import type { Projection } from "./replay.js";

/**
 * The replay projection (and the title text policy) load on first use: `session.create`, `open` and `close`, on a
 * fresh process's first-turn path, need neither.
 */
type ReplayModule = typeof import("./replay.js");
let replayModule: Promise<ReplayModule> | null = null;
const loadReplay = (): Promise<ReplayModule> => (replayModule ??= import("./replay.js"));

export interface SessionMethodsDeps {
  /** Shared with the turn family (turns attach implicitly through the same manager). */
  manager: SessionManager;
  /** Working directory recorded in the header of sessions created by `session.create`. */
  cwd: string;
  /**
   * I/O diagnostics (stderr): a session that could not be created or opened for a cause the user can fix (a full
   * disk, a read-only file system, …) is named there, since the wire's error messages are fixed.
   */
  log?: (line: string) => void;
}

interface PageParams {
  after: string | null;
  limit: number;
}

const MAX_CONTINUATION_BYTES = 128;

/** Sidecar format of replay projections: bump on any change to the projection, its encoding or the window. */
const PROJECTION_FORMAT = `replay-v3;${DEFAULT_WINDOW.maxBytes},${DEFAULT_WINDOW.maxRecords},${DEFAULT_WINDOW.quantumBytes}`;

/** Maps a store failure to its wire code. Anything unexpected is a fixed `internal_error`. */
export function sessionErrorCode(err: unknown): ErrorCode {
  if (!(err instanceof SessionError)) return "internal_error";
  switch (err.code) {
    case "invalid_id":
      return "invalid_session_id";
    case "busy":
    case "lost":
      return "session_busy";
    case "unavailable":
      return "session_unavailable";
    case "limit":
      return "limit_exceeded";
    case "invalid_record":
      return "internal_error";
  }
}

/**
 * `{after?, limit?}`: after null|string of at most 128 bytes, limit integer 1..32 (> 32: limit_exceeded).
 * An over-long `after` is `overlong`: a list continuation is a session ID (invalid_session_id), a replay cursor a
 * bounded continuation string (limit_exceeded).
 */
export function parsePage(p: Record<string, unknown>, overlong: ErrorCode = "limit_exceeded"): ParseResult<PageParams> {
  if (!onlyKeys(p, ["after", "limit"])) return { ok: false, error: "invalid_payload" };
  const after = p.after === undefined ? null : p.after;
  const limit = p.limit === undefined ? LIMITS.max_session_page_items : p.limit;
  if (after !== null && typeof after !== "string") return { ok: false, error: "invalid_payload" };
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1) return { ok: false, error: "invalid_payload" };
  if (limit > LIMITS.max_session_page_items) return { ok: false, error: "limit_exceeded" };
  if (after !== null && utf8Length(after) > MAX_CONTINUATION_BYTES) return { ok: false, error: overlong };
  return { ok: true, value: { after, limit } };
}

function fail(err: unknown, sessionId?: string | null): Outcome {
  return sessionId === undefined ? { error: sessionErrorCode(err) } : { error: sessionErrorCode(err), sessionId };
}

export function sessionMethods(deps: SessionMethodsDeps): MethodFamily {
  const { manager } = deps;
  const store = manager.store;
  const diagnose = (method: string, e: unknown): void => {
    const problem = storageProblemOf(e);
    if (problem !== undefined) deps.log?.(`berth service: ${method} failed: ${problem}`);
  };
  /**
   * Projections of recently replayed sessions, keyed by ID, reused while the file version is unchanged. Behind it,
   * each computed projection is persisted as a sidecar (store.writeSidecar) so that the first replay after a
   * restart loads it instead of re-deriving it from the JSONL.
   */
  const cache = new Map<string, { version: FileVersion; projection: Projection }>();
  const CACHE_SIZE = 8;
  const PERSIST_DELAY_MS = 20;
  /** Sidecar writes in flight, by session: at most one each; drained at EOF. */
  const persisting = new Map<string, Promise<void>>();

  function remember(id: string, version: FileVersion, projection: Projection): void {
    cache.delete(id);
    cache.set(id, { version, projection });
    while (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  }

  /**
   * Writes the sidecar shortly after the current request (a timer, so the response is written first; a cache:
   * failures are ignored).
   */
  function persist(id: string, version: FileVersion, projection: Projection, encodeProjection: ReplayModule["encodeProjection"]): void {
    if (persisting.has(id)) return;
    const job = new Promise<void>((resolve) => setTimeout(resolve, PERSIST_DELAY_MS))
      .then(() => store.writeSidecar(id, PROJECTION_FORMAT, version, encodeProjection(projection)))
      .catch(() => undefined)
      .finally(() => persisting.delete(id));
    persisting.set(id, job);
  }

  /** A projection of an earlier version of the same file that `extendProjection` may continue. */
  function resumable(from: FileVersion, p: Projection, now: FileVersion): boolean {
    return p.state !== null && from.ino === now.ino && from.size <= now.size;
  }

  /**
   * The projection of the session's current window: reused (memory, then sidecar) when made from the current file
   * version; else extended from an earlier one (memory, then sidecar) when the file only grew; else projected from
   * the whole window. A new projection is cached and persisted.
   */
  async function currentProjection(id: string): Promise<Projection> {
    const { UNPROJECTED_KINDS, decodeProjection, encodeProjection, extendProjection, projectSnapshot } = await loadReplay();
    const got: { found: Projection | null; base: Projection | null } = { found: null, base: null };
    // Called by the store with the file's current version (possibly twice: lock-free, then under the append lock).
    const reuse = async (version: FileVersion): Promise<boolean | ResumePoint> => {
      got.found = got.base = null;
      const hit = cache.get(id);
      if (hit && sameVersion(hit.version, version)) got.found = hit.projection;
      else if (hit && resumable(hit.version, hit.projection, version)) got.base = hit.projection;
      else {
        const side = await store.readSidecar(id, PROJECTION_FORMAT);
        const p = side === null ? null : decodeProjection(id, side.payload);
        if (side !== null && p !== null && sameVersion(side.version, version)) {
          remember(id, version, p);
          got.found = p;
        } else if (side !== null && p !== null && resumable(side.version, p, version)) got.base = p;
      }
      return got.found !== null || (got.base?.state?.point ?? false);
    };
    const snap = await store.readWindow(id, DEFAULT_WINDOW, reuse, UNPROJECTED_KINDS);
    if (snap === "unchanged") {
      if (got.found === null) throw new Error("replay: reuse without a projection");
      return got.found;
    }
    let projection = snap.since !== null && got.base !== null ? extendProjection(got.base, snap) : null;
    let version = snap.version;
    if (projection === null) {
      const full = snap.since === null ? snap : await store.readWindow(id, DEFAULT_WINDOW, undefined, UNPROJECTED_KINDS);
      if (full === "unchanged") throw new Error("replay: unchanged without a reuse check");
      projection = projectSnapshot(id, full);
      version = full.version;
    }
    remember(id, version, projection);
    persist(id, version, projection, encodeProjection);
    return projection;
  }

  const list: MethodDescriptor<PageParams> = {
    method: "session.list",
    sessionId: "forbidden",
    parse: (p) => parsePage(p, "invalid_session_id"),
    async handle(_ctx, { after, limit }) {
      if (after !== null && !isValidSessionId(after)) return { error: "invalid_session_id" };
      try {
        const [page, { titleFrom }] = await Promise.all([store.list(after, limit), import("./replay-text.js")]);
        return {
          payload: {
            sessions: page.entries.map((e) => ({
              session_id: e.id,
              title: titleFrom(e.titleSource),
              updated_at: new Date(e.updatedAtMs).toISOString(),
            })),
            next_after: page.nextAfter,
            truncated: page.truncated,
            incomplete: page.incomplete,
          },
        };
      } catch (e) {
        return fail(e);
      }
    },
  };

  const create: MethodDescriptor<Record<string, never>> = {
    method: "session.create",
    sessionId: "forbidden",
    parse: emptyPayload,
    async handle() {
      try {
        const id = await manager.create(deps.cwd);
        return { payload: { session_id: id, status: "open" }, sessionId: id };
      } catch (e) {
        diagnose("session.create", e);
        return fail(e);
      }
    },
  };

  const open: MethodDescriptor<Record<string, never>> = {
    method: "session.open",
    sessionId: "required",
    parse: emptyPayload,
    async handle(ctx) {
      const id = ctx.sessionId as string;
      try {
        await manager.open(id);
        return { payload: { session_id: id, status: "open" } };
      } catch (e) {
        diagnose("session.open", e);
        return fail(e);
      }
    },
  };

  const replay: MethodDescriptor<PageParams> = {
    method: "session.replay",
    sessionId: "required",
    parse: (p) => parsePage(p, "limit_exceeded"),
    async handle(ctx, { after, limit }) {
      const id = ctx.sessionId as string;
      if (!isValidSessionId(id)) return { error: "invalid_session_id" };
      try {
        return { payload: { ...(await loadReplay()).replayPage(await currentProjection(id), after, limit) } };
      } catch (e) {
        return fail(e);
      }
    },
  };

  const close: MethodDescriptor<Record<string, never>> = {
    method: "session.close",
    sessionId: "required",
    parse: emptyPayload,
    async handle(ctx) {
      const id = ctx.sessionId as string;
      try {
        const status = await manager.close(id);
        return { payload: { session_id: id, status } };
      } catch (e) {
        return fail(e);
      }
    },
  };

  return {
    descriptors: [list, create, open, replay, close],
    /** EOF/output failure: turns were drained first (reverse registration order); release every remaining lease. */
    drain: async () => {
      await manager.drain();
      await Promise.all(persisting.values());
    },
  };
}
