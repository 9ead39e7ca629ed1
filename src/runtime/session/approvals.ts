/**
 * Pending approvals of one session, by server-generated ID. Contracts:
 * - `needsApproval(mode, risk)`: `never` → no; `always` → yes; `on-risk` → every risk class but `read_only`;
 *   `edits` → every risk class but `read_only` and `filesystem`.
 * - Each request gets a fresh UUID (never reused, even across turns); `resolve(id, approved)` answers it once —
 *   an unknown or already-answered ID returns false.
 * - When the turn's signal fires while a request is pending, the request is withdrawn (removed, `onWithdrawn`) and
 *   the call ends `cancelled` (tool-exec's `decide` observes the same signal).
 * - `summary`: one line for a person, bounded and redacted (`Run shell command: cargo test`).
 */
import { randomUUID } from "../../store/random.js";
import { redactSecrets, sanitizeText } from "../../core/text-policy.js";
import { truncateUtf8 } from "../../core/utf8.js";
import type { ApprovalDecision } from "../approval.js";
import type { ToolRisk } from "../types.js";
import type { ApprovalMode } from "./types.js";

export const MAX_SUMMARY_BYTES = 256;

export function needsApproval(mode: ApprovalMode, risk: ToolRisk): boolean {
  if (mode === "never") return false;
  if (mode === "always") return true;
  if (mode === "edits") return risk !== "read_only" && risk !== "filesystem";
  return risk !== "read_only";
}

export function approvalSummary(name: string, args: Record<string, unknown>): string {
  const str = (k: string): string | null => (typeof args[k] === "string" ? (args[k]) : null);
  let s: string;
  if (name === "bash" && str("command") !== null) s = `Run shell command: ${str("command")}`;
  else if ((name === "edit" || name === "write") && str("path") !== null) s = `${name === "edit" ? "Edit" : "Write"} file: ${str("path")}`;
  else if (name === "task" && str("description") !== null) s = `Delegate a task: ${str("description")}`;
  else s = `Use tool ${name}`;
  const line = redactSecrets(sanitizeText(s.length > 2048 ? s.slice(0, 2048) : s).replace(/\s+/g, " ").trim());
  return truncateUtf8(line, MAX_SUMMARY_BYTES);
}

interface Pending {
  callId: string;
  resolve: (d: ApprovalDecision) => void;
}

export class ApprovalBook {
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly newId: () => string = randomUUID) {}

  get size(): number {
    return this.pending.size;
  }

  /**
   * Registers a request; `announce(id)` is called synchronously with its ID (emit the event there). Resolves with
   * the answer, or `deny` once the signal fires (the call then ends `cancelled`: `decide` sees the signal).
   */
  request(callId: string, signal: AbortSignal, announce: (approvalId: string) => void, onWithdrawn: (approvalId: string) => void): Promise<ApprovalDecision> {
    const id = this.newId();
    return new Promise<ApprovalDecision>((resolve) => {
      const onAbort = (): void => {
        if (!this.pending.delete(id)) return;
        onWithdrawn(id);
        resolve("deny");
      };
      this.pending.set(id, {
        callId,
        resolve: (d) => {
          signal.removeEventListener("abort", onAbort);
          resolve(d);
        },
      });
      signal.addEventListener("abort", onAbort, { once: true });
      announce(id);
      if (signal.aborted) onAbort();
    });
  }

  /** Answers a pending request; false when the ID is unknown or already answered. */
  resolve(id: string, approved: boolean): { callId: string } | null {
    const p = this.pending.get(id);
    if (p === undefined) return null;
    this.pending.delete(id);
    p.resolve(approved ? "approve" : "deny");
    return { callId: p.callId };
  }

  /** IDs of pending requests (oldest first). */
  ids(): string[] {
    return [...this.pending.keys()];
  }
}
