/**
 * The session commands the host routes to a Berth session's chat (`command` frames): `prompt`, `abort`, `steer`,
 * `configure`, `confirm_tool`, `complete_input`, `follow_up`, and the v3 chat commands (delegated to `chats.ts`).
 * Each answers its `commandId` exactly once through `answer`; see `backend.ts` for the contracts.
 */
import { randomUUID } from "node:crypto";
import type { SessionRuntime } from "../../runtime/session/index.js";
import { parseAnswer, parseConfigure, selectionOf } from "./parse.js";
import type { ChatCommands, Lane } from "./chats.js";
import { registryWriteFailed, type LiveSession } from "./sessions.js";
import type { Json } from "../../core/json-bounds.js";

export interface SessionCommandDeps {
  chats: ChatCommands;
  /** `dispose_chat` (`disposal.ts`); always answers. */
  disposeChat: (commandId: string, s: LiveSession, cmd: Json) => void;
  answer: (commandId: string, ok: boolean, error?: string) => void;
  emit: (s: LiveSession, lane: Lane, ev: Json) => void | Promise<void>;
  runtimeOf: (s: LiveSession, lane: Lane) => SessionRuntime;
  save: () => Promise<void>;
  /** The registry file `save` writes (named in the fix of a failed write). */
  registryPath: string;
  admitTurn: (s: LiveSession, lane: Lane, text: string, turnId: string, pendingId: string | undefined, reply: (ok: boolean, error?: string) => void) => Promise<void>;
}

const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

export class SessionCommands {
  constructor(private readonly d: SessionCommandDeps) {}

  /** Run one command `cmd` (with a string `type`) for chat `lane` of session `s`. */
  run(commandId: string, s: LiveSession, lane: Lane, cmd: Json & { type: string }): void {
    const answer = (ok: boolean, err?: string): void => this.d.answer(commandId, ok, err);
    switch (cmd.type) {
      case "prompt":
        if (typeof cmd.text !== "string") return answer(false, "prompt needs text");
        return void this.d.admitTurn(s, lane, cmd.text, typeof cmd.turnId === "string" ? cmd.turnId : randomUUID(), undefined, answer);
      case "abort":
        lane.rt?.cancel(); // queued follow-ups still run: each is its own turn
        return answer(true);
      case "steer": {
        const text = typeof cmd.text === "string" ? cmd.text : isObj(cmd.message) && typeof cmd.message.text === "string" ? cmd.message.text : null;
        if (text === null) return answer(false, "steer needs text");
        if (lane.rt?.steer(text, typeof cmd.id === "string" ? cmd.id : undefined) !== true) return answer(false, "no turn is running");
        return answer(true);
      }
      case "configure":
        return this.configure(commandId, s, cmd);
      case "confirm_tool": {
        const approvalId = typeof cmd.toolCallId === "string" ? lane.projection?.approvalOf(cmd.toolCallId) : undefined;
        const ok = approvalId !== undefined && typeof cmd.approved === "boolean" && lane.rt?.resolveApproval(approvalId, cmd.approved) === true;
        if (!ok) return answer(false, "no pending confirmation for that tool call");
        answer(true);
        void this.d.emit(s, lane, { type: "tool_confirmation_resolved", toolCallId: cmd.toolCallId, approved: cmd.approved, commandId });
        return;
      }
      case "complete_input": {
        const requestId = cmd.requestId;
        const q = typeof requestId === "string" ? lane.rt?.question(requestId) : undefined;
        if (typeof requestId !== "string" || q === undefined || lane.rt === undefined) return answer(false, "no pending question with that requestId");
        const input = parseAnswer(cmd, q);
        if (typeof input === "string") return answer(false, input);
        lane.projection?.answeredBy.set(requestId, commandId);
        const r = lane.rt.answerQuestion(requestId, input);
        if (!r.ok) {
          lane.projection?.answeredBy.delete(requestId);
          return answer(false, r.error);
        }
        return answer(true);
      }
      case "follow_up": {
        if (typeof cmd.text !== "string" || typeof cmd.id !== "string") return answer(false, "follow_up needs text and id");
        const rt = this.d.runtimeOf(s, lane);
        if (rt.busy) {
          const entry = rt.submit(cmd.text, { submitter: "follow_up" });
          lane.projection?.pendingIds.set(entry.queue_id, cmd.id);
          return answer(true);
        }
        return void this.d.admitTurn(s, lane, cmd.text, randomUUID(), cmd.id, answer);
      }
      case "create_chat":
        s.registered = true; // its chats must survive a restart
        return void this.d.chats.create(commandId, s, cmd);
      case "dispose_chat":
        return this.d.disposeChat(commandId, s, cmd);
      case "fetch_turns":
        return void this.d.chats.fetch(commandId, s, lane, cmd);
      default:
        return answer(false, `the Berth runtime does not support ${cmd.type.slice(0, 64)}`);
    }
  }

  /**
   * `configure`: durable first, then applied to every chat (now when idle, else from its next turn). A failed
   * registry write refuses it naming the cause and the fix, and changes nothing: the entry gets back what this
   * command changed (unless a later `configure` changed it since), and no runtime was told.
   */
  private configure(commandId: string, s: LiveSession, cmd: Json): void {
    const c = parseConfigure(cmd);
    if (typeof c === "string") return this.d.answer(commandId, false, c);
    const before = { model: s.entry.model, thinkingLevel: s.entry.thinkingLevel, registered: s.registered };
    if (c.model !== undefined) s.entry.model = c.model;
    if (c.thinkingLevel !== undefined) s.entry.thinkingLevel = c.thinkingLevel;
    s.registered = true;
    void this.d.save().then(
      () => {
        const selection = selectionOf(s.entry.model, s.entry.thinkingLevel);
        for (const l of [s.primary, ...s.chats.values()]) if (selection !== undefined) l.rt?.reconfigure({ selection });
        this.d.answer(commandId, true);
      },
      (e: unknown) => {
        if (c.model !== undefined && s.entry.model === c.model) {
          if (before.model === undefined) delete s.entry.model;
          else s.entry.model = before.model;
        }
        if (c.thinkingLevel !== undefined && s.entry.thinkingLevel === c.thinkingLevel) {
          if (before.thinkingLevel === undefined) delete s.entry.thinkingLevel;
          else s.entry.thinkingLevel = before.thinkingLevel;
        }
        s.registered = before.registered;
        this.d.answer(commandId, false, registryWriteFailed(e, this.d.registryPath, "the model and reasoning level are unchanged", "configure the session again"));
      },
    );
  }
}
