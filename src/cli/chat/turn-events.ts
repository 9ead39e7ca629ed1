/**
 * One turn's output in interactive `berth chat`: the SCV event stream rendered as answer text, tool cards, status
 * lines and approval questions. The turn runner (chat-turn.ts) hands this module the few operations a turn needs.
 */
import type { ScvEvent } from "../../client/scv/client.js";
import { shortArgs, type ApprovalInfo } from "./approval.js";
import type { LiveAnswer } from "./live.js";
import { terminalSafe } from "../terminal-safe.js";
import { textOf } from "../../core/json-text.js";

/** The session a chat has open. */
export interface OpenSession {
  id: string;
  cwd: string;
  model: string | null;
  ctxMax: number | null;
}

/** What the event renderer needs from the chat loop. */
export interface TurnHost {
  write(text: string): void;
  line(text: string): void;
  status(text: string): void;
  atLineStart(): boolean;
  bold(text: string): string;
  /** True when a tool is approved without asking (--yolo, or "always" for that tool). */
  autoApproves(name: string): boolean;
  /** Asks the user; resolves with the answer. */
  ask(info: ApprovalInfo): Promise<boolean>;
  /** Answers an approval on the server. */
  resolveApproval(approvalId: string, yes: boolean): void;
  /** The context gauge's new reading. */
  context(current: number, max: number): void;
}

/** The handler for one turn's events; `answer` receives the assistant text. */
export function turnEvents(host: TurnHost, s: OpenSession, answer: LiveAnswer): (ev: ScvEvent) => void {
  const args = new Map<string, unknown>();
  const names = new Map<string, string>();
  let live = "";
  let pending: Promise<void> = Promise.resolve();
  // Everything shown comes through terminalSafe: the model, tools and their output may carry terminal controls. The
  // answer's text goes to the live answer raw: it shows the controls, and ends a line at a CR (it sees a CR and the
  // LF after it together, even when they arrive in two deltas).
  const stream = (t: string): void => answer.stream(t);
  const endMessage = (): void => answer.end();
  return (ev: ScvEvent): void => {
    switch (ev.type) {
      case "assistant.delta":
        live += textOf(ev["content"]);
        stream(textOf(ev["content"]));
        break;
      case "assistant.completed": {
        const c = typeof ev["content"] === "string" ? ev["content"] : "";
        if (c !== live && c.startsWith(live)) stream(c.slice(live.length));
        live = "";
        endMessage();
        if (!host.atLineStart()) host.write("\n");
        break;
      }
      case "tool.proposed":
        endMessage();
        args.set(String(ev["call_id"]), ev["arguments"]);
        names.set(String(ev["call_id"]), String(ev["name"]));
        host.line(host.bold(`● ${terminalSafe(shortArgs(String(ev["name"]), ev["arguments"]), false)}`));
        break;
      case "approval.requested": {
        const name = String(ev["name"]);
        const id = String(ev["approval_id"]);
        if (host.autoApproves(name)) {
          host.resolveApproval(id, true);
          break;
        }
        const info: ApprovalInfo = {
          name,
          arguments: (args.get(String(ev["call_id"])) as Record<string, unknown> | undefined) ?? null,
          cwd: textOf(ev["cwd"], s.cwd),
          summary: textOf(ev["summary"]),
          risk: textOf(ev["risk"]),
        };
        pending = pending.then(() => host.ask(info)).then((yes) => host.resolveApproval(id, yes));
        break;
      }
      case "tool.progress":
        host.status(terminalSafe(textOf(ev["text"]).split("\n").at(-1)!.slice(0, 120), false));
        break;
      case "tool.completed": {
        const err = typeof ev["error"] === "string" ? ev["error"] : null;
        const label = names.get(String(ev["call_id"])) ?? String(ev["name"]);
        const st = ev["success"] === true ? "done" : err === "cancelled" ? "cancelled" : err === "denied" ? "denied" : `failed (${err ?? "failed"})`;
        host.status(terminalSafe(`${label} ${st}`, false));
        break;
      }
      case "context.compacted":
        host.status(`context compacted: ${String(ev["before_tokens"])} → ${String(ev["after_tokens"])} tokens`);
        break;
      case "turn.completed": {
        const u = ev["usage"] as { input_tokens?: number } | undefined;
        if (u?.input_tokens !== undefined && s.ctxMax !== null) host.context(u.input_tokens, s.ctxMax);
        break;
      }
      default:
        break;
    }
  };
}
