/**
 * The Berth backend's registry: which Berth sessions it serves to the host, owner-only JSON (0600) in the host
 * state directory. Contracts: `load` is tolerant (a missing or malformed file is an empty registry; entries
 * without a string `sessionId`/`cwd` are dropped); `save` writes atomically, serialized, and resolves once that
 * version is on disk.
 */
import { readFileSync } from "node:fs";
import { writeFileAtomic } from "../atomic-file.js";

export interface BerthRegistryEntry {
  sessionId: string;
  cwd: string;
  title: string;
  /**
   * Further chats of the session (AHP `createChat`): each is a Berth session of its own. A disposed chat stays
   * listed with `disposed: true` so its kept Berth session is not offered again as a session of its own. A side
   * chat keeps the excerpt it was opened on (`selection`) until its first turn has taken it.
   */
  chats?: Array<{ uri: string; sessionId: string; title: string; disposed?: boolean; selection?: string }>;
  /** The session's model (`configure`), applied to every chat; unset: the settings' selection. */
  model?: { provider: string; id: string };
  /** The session's reasoning level (`configure`). */
  thinkingLevel?: string;
  /** Disposed through AHP: kept only so its Berth session (and chats) are not listed again. */
  disposed?: boolean;
  /** Until the host accepted the claim. */
  requestedSession?: string;
  creationToken?: string;
}

export class BerthRegistry {
  private last: Promise<void> = Promise.resolve();

  constructor(private readonly path: string) {}

  load(): BerthRegistryEntry[] {
    try {
      const v = JSON.parse(readFileSync(this.path, "utf8")) as { sessions?: BerthRegistryEntry[] };
      return Array.isArray(v.sessions) ? v.sessions.filter((e) => typeof e.sessionId === "string" && typeof e.cwd === "string") : [];
    } catch {
      return [];
    }
  }

  save(entries: BerthRegistryEntry[]): Promise<void> {
    const text = JSON.stringify({ sessions: entries }) + "\n";
    this.last = this.last.catch(() => undefined).then(() => writeFileAtomic(this.path, text, 0o600));
    return this.last;
  }

  /** Resolves once every save so far settled. */
  settled(): Promise<void> {
    return this.last.catch(() => undefined);
  }
}
