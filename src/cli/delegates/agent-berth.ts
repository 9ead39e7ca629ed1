/**
 * `agent_berth` (risk `delegate`): a nested Berth over the SCV protocol on `berth stdio`.
 *
 * Contract:
 * - One child process per conversation. A call without `session` starts a conversation (handle `berth-N`, numbered
 *   per process); a call naming one continues it (its next turn). A conversation belongs to the calling session.
 * - The child runs in a private home `$MC_HOME/adapters/berth` (0700) with a copy of the caller's `settings.json` and
 *   `auth.json` (0600) taken at its start, in its own process group, with `SCV_PARENT=<instance>/<session>/<run>` and
 *   `SCV_DELEGATION_DEPTH`; it opens its SCV session with `delegation_depth` = the caller's depth + 1.
 * - Each conversation is a delegated run with a record (runtime/delegation/records.ts) whose `turn` counts its
 *   turns; ending the conversation stops its process group (TERM → 2 s → KILL) and removes the record.
 * - A nested `approval.requested` is relayed through the calling session's approval gate with its summary prefixed
 *   `[berth-N depth D]`, and answered with the gate's decision.
 * - Cancelling the call or its timeout sends `turn.cancel`; a child that has not ended the turn within
 *   `CANCEL_GRACE_MS` is stopped. A child that dies mid-turn fails the call and ends the conversation.
 * - The conversation ends with the child process, not with the last holder of its pipes (process-end.ts): once it
 *   exits, its output is read for `STDOUT_DRAIN_MS`, the connection closes and the rest of its process group is
 *   stopped, so a helper it left holding its stdout keeps neither a call nor the session's close waiting.
 * - Nested tool activity becomes progress lines (`▸ bash`, the nested `tool.progress` text), never tool output.
 * - Idle conversations end after `IDLE_MS`; `close()` ends them all.
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFile, mkdir, chmod, access } from "node:fs/promises";
import { join } from "node:path";
import { ScvConnection, ScvConnectionError, type ScvEvent } from "../../client/scv/connection.js";
import { spawnBerth } from "../../client/spawn-berth.js";
import { newHandle, processStart, stopRun, writeRecord, type DelegationRecord } from "../../runtime/delegation/records.js";
import { defineLocalTool } from "../../runtime/tools/define.js";
import type { Tool, ToolResult, ToolRisk } from "../../runtime/types.js";
import type { SessionToolContext } from "../../runtime/agent.js";
import { echoed, jobRef, type JobBook } from "./jobs.js";
import { processEnded } from "./process-end.js";
import { fitAgentResult, RESULT_BOUND } from "./reply-fit.js";
import { textOf } from "../../core/json-text.js";
import { AGENT_BERTH, AGENT_BERTH_DEF, BERTH_DEFAULT_TIMEOUT_SECONDS, BERTH_MAX_TIMEOUT_SECONDS, promptRefusal } from "./tool-defs.js";

export { AGENT_BERTH, BERTH_DEFAULT_TIMEOUT_SECONDS as DEFAULT_TIMEOUT_SECONDS, BERTH_MAX_TIMEOUT_SECONDS as MAX_TIMEOUT_SECONDS };
const DEFAULT_TIMEOUT_SECONDS = BERTH_DEFAULT_TIMEOUT_SECONDS;
export const CANCEL_GRACE_MS = 5000;
export const IDLE_MS = 10 * 60_000;

export interface BerthDelegatesOptions {
  /** The process's background jobs (shared with the CLI agents; see jobs.ts). */
  jobs: JobBook;
  home: string;
  berthBin: string;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

interface Conversation {
  name: string;
  sessionId: string;
  child: ChildProcessWithoutNullStreams;
  conn: ScvConnection;
  nestedSession: string;
  record: DelegationRecord;
  depth: number;
  turn: number;
  busy: boolean;
  idle: NodeJS.Timeout | null;
  exited: Promise<void>;
  /** Set when the conversation starts ending; settles once its process group is stopped and its record gone. */
  ending: Promise<void> | null;
}


/** Short instance name of a home (the first segment of `SCV_PARENT`). */
export function instanceOf(home: string): string {
  return createHash("sha256").update(home).digest("hex").slice(0, 8);
}

export class BerthDelegates {
  private readonly conversations = new Map<string, Conversation>();
  private next = 1;
  private readonly jobs: JobBook;

  constructor(private readonly o: BerthDelegatesOptions) {
    this.jobs = o.jobs;
  }

  /** The session's delegate tools (none when its runs would exceed `maxDepth`) and the job tools. */
  tools(s: SessionToolContext, maxDepth: number): Tool[] {
    if (s.depth + 1 > maxDepth) return [];
    return [this.tool(s), ...this.jobs.tools(s.sessionId, s.earlierJobs)];
  }

  private tool(s: SessionToolContext): Tool {
    return defineLocalTool({
      ...AGENT_BERTH_DEF,
      execute: async (args, ctx): Promise<ToolResult> => {
        const long = promptRefusal(AGENT_BERTH, args.prompt);
        if (long !== null) return long;
        const full = args.background === true ? this.jobs.refusal(s.sessionId, AGENT_BERTH) : null;
        if (full !== null) return full; // before a nested Berth is started for it
        let conv: Conversation;
        if (args.session !== undefined) {
          const c = this.conversations.get(args.session);
          if (c === undefined || c.sessionId !== s.sessionId)
            return { content: `${AGENT_BERTH}: no conversation ${echoed(args.session)} in this session`, isError: true, errorKind: "invalid_arguments" };
          if (c.busy) return { content: `${AGENT_BERTH}: ${args.session} is busy with another turn`, isError: true, errorKind: "failed" };
          conv = c;
        } else {
          try {
            conv = await this.start(s);
          } catch (e) {
            return { content: `${AGENT_BERTH}: the nested Berth did not start: ${e instanceof Error ? e.message.slice(0, 300) : "unknown error"}`, isError: true, errorKind: "unavailable" };
          }
        }
        const timeoutMs = (args.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS) * 1000;
        if (args.background !== true) return this.turn(conv, args.prompt, timeoutMs, ctx);
        // A job outlives this call: its approvals get the session's unattended answer.
        const job = this.jobs.start(s.sessionId, AGENT_BERTH, args.prompt, (signal) =>
          this.turn(conv, args.prompt, timeoutMs, { cwd: ctx.cwd, signal, onProgress: () => undefined, approve: (r) => Promise.resolve(s.unattended(r.name, r.risk)) }),
        );
        return { content: JSON.stringify({ job: job.id, status: "running", session: conv.name }), isError: false, jobs: [jobRef(job)] };
      },
    });
  }

  private async start(s: { sessionId: string; depth: number; cwd: string }): Promise<Conversation> {
    const childHome = join(this.o.home, "adapters", "berth");
    await mkdir(childHome, { recursive: true, mode: 0o700 });
    await chmod(childHome, 0o700);
    for (const f of ["settings.json", "auth.json"]) {
      const src = join(this.o.home, f);
      if (await access(src).then(() => true, () => false)) {
        await copyFile(src, join(childHome, f));
        await chmod(join(childHome, f), 0o600);
      }
    }
    const name = `berth-${this.next++}`;
    const handle = newHandle("berth");
    const depth = s.depth + 1;
    const env: NodeJS.ProcessEnv = { ...this.o.env, MC_HOME: childHome, SCV_PARENT: `${instanceOf(this.o.home)}/${s.sessionId}/${handle}`, SCV_DELEGATION_DEPTH: String(depth) };
    delete env["SCV_HOME"];
    delete env["BERTH_HOME"];
    // The launcher's credential handoff: the nested Berth's tools cannot read the keys from its environ.
    const child = spawnBerth(this.o.berthBin, ["stdio"], env, { cwd: s.cwd, stdio: ["pipe", "pipe", "pipe"], detached: true }) as ChildProcessWithoutNullStreams;
    child.stderr.on("data", () => undefined);
    child.stdin.on("error", () => undefined);
    const exited = processEnded(child).then(() => undefined);
    const pid = child.pid;
    if (pid === undefined) throw new Error("spawn failed");
    const record: DelegationRecord = {
      handle,
      agent: "berth",
      instance: instanceOf(this.o.home),
      session: s.sessionId,
      depth,
      pid,
      pid_start: await processStart(pid),
      owner_pid: process.pid,
      owner_start: await processStart(process.pid),
      cwd: s.cwd,
      started_unix_seconds: Math.floor(Date.now() / 1000),
      conversation: name,
      turn: 0,
    };
    await writeRecord(this.o.home, record);
    const conn = new ScvConnection(child.stdout, child.stdin);
    const conv: Conversation = { name, sessionId: s.sessionId, child, conn, nestedSession: "", record, depth, turn: 0, busy: false, idle: null, exited, ending: null };
    this.conversations.set(name, conv);
    // Its pipes are let go once it exited (they end without an "end" when a helper still holds them): the turn in
    // flight fails as "exited mid-turn", and the conversation ends, which stops what is left of its group.
    void exited.then(() => {
      conn.close(new ScvConnectionError(`the nested Berth ${name} exited`));
      void this.end(conv);
    });
    try {
      await conn.request("initialize", { protocol_version: 3, client: { name: "berth-agent_berth", version: "1" } }, ["initialized"]);
      const started = await conn.request("session.start", { cwd: s.cwd, delegation_depth: depth }, ["session.started"]);
      conv.nestedSession = String(started["session_id"]);
    } catch (e) {
      await this.end(conv);
      throw e;
    }
    return conv;
  }

  private async turn(conv: Conversation, prompt: string, timeoutMs: number, ctx: Parameters<Tool["run"]>[1]): Promise<ToolResult> {
    if (conv.idle !== null) clearTimeout(conv.idle);
    conv.busy = true;
    conv.turn += 1;
    conv.record.turn = conv.turn;
    // The record names this turn before the nested turn starts: `delegations` may list the run at any moment of it.
    await writeRecord(this.o.home, conv.record).catch(() => undefined);
    return this.runTurn(conv, prompt, timeoutMs, ctx);
  }

  private runTurn(conv: Conversation, prompt: string, timeoutMs: number, ctx: Parameters<Tool["run"]>[1]): Promise<ToolResult> {
    const prefix = `[${conv.name} depth ${conv.depth}]`;
    return new Promise<ToolResult>((resolve) => {
      let turnId: string | null = null;
      let reply = "";
      let cancelled: "cancelled" | "timeout" | null = null;
      let grace: NodeJS.Timeout | undefined;
      const cancel = (why: "cancelled" | "timeout"): void => {
        cancelled ??= why;
        if (turnId !== null) conv.conn.notify("turn.cancel", { session_id: conv.nestedSession, turn_id: turnId });
        grace ??= setTimeout(() => void this.end(conv), CANCEL_GRACE_MS);
      };
      const onAbort = (): void => cancel("cancelled");
      const timer = setTimeout(() => cancel("timeout"), timeoutMs);
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      if (ctx.signal.aborted) onAbort();
      const result = (status: string, isError: boolean, errorKind?: ToolResult["errorKind"]): ToolResult => {
        const body = { agent: "berth", status, session: conv.name, turn: conv.turn, reply, truncated: false };
        // Bounded as a whole (the reply cut to fit, saying so): the tool result bound would cut it through its JSON.
        const content = fitAgentResult(body, RESULT_BOUND) ?? JSON.stringify({ ...body, reply: "", truncated: true });
        return { content, isError, ...(errorKind !== undefined ? { errorKind } : {}) };
      };
      const done = (r: ToolResult): void => {
        clearTimeout(timer);
        clearTimeout(grace);
        ctx.signal.removeEventListener("abort", onAbort);
        conv.conn.release(rid);
        conv.busy = false;
        if (this.conversations.has(conv.name)) conv.idle = setTimeout(() => void this.end(conv), IDLE_MS);
        conv.idle?.unref();
        resolve(r);
      };
      const rid = conv.conn.send("turn.start", { session_id: conv.nestedSession, prompt }, {
        onEvent: (ev: ScvEvent) => {
          switch (ev.type) {
            case "turn.started":
              turnId = typeof ev["turn_id"] === "string" ? ev["turn_id"] : null;
              if (cancelled !== null) cancel(cancelled);
              break;
            case "assistant.completed":
              if (typeof ev["content"] === "string" && ev["content"] !== "") reply = ev["content"];
              break;
            case "approval.requested":
              void this.relay(conv, ev, prefix, ctx);
              break;
            case "tool.started":
              ctx.onProgress(`${prefix} ▸ ${String(ev["name"])}`);
              break;
            case "tool.progress":
              for (const line of textOf(ev["text"]).split("\n")) if (line !== "") ctx.onProgress(`${prefix} ${line}`);
              break;
            case "turn.completed":
              return done(result("completed", false));
            case "turn.cancelled":
              // Not cancelled by us: the nested run was stopped from outside (delegation_kill, a signal).
              if (cancelled === null) return done(result("cancelled", true, "failed"));
              return done(result(cancelled === "timeout" ? "timeout" : "cancelled", true, cancelled === "timeout" ? "limit" : "cancelled"));
            case "turn.failed":
              return done(result("failed", true, "failed"));
            case "error":
              return done({ content: `${AGENT_BERTH}: the nested Berth refused the turn (${String(ev["code"])})`, isError: true, errorKind: "failed" });
            default:
              break;
          }
        },
        // The result comes once the conversation has ended (its group stopped), as it says.
        onClose: () =>
          void this.end(conv).then(() => {
            if (cancelled !== null) return done(result(cancelled === "timeout" ? "timeout" : "cancelled", true, cancelled === "timeout" ? "limit" : "cancelled"));
            done({ content: `${AGENT_BERTH}: the nested Berth ${conv.name} exited mid-turn; the conversation has ended`, isError: true, errorKind: "failed" });
          }),
      });
    });
  }

  private async relay(conv: Conversation, ev: ScvEvent, prefix: string, ctx: Parameters<Tool["run"]>[1]): Promise<void> {
    const risk = (["read_only", "filesystem", "process", "delegate", "network"] as const).includes(ev["risk"] as ToolRisk) ? (ev["risk"] as ToolRisk) : "process";
    const summary = `${prefix} ${textOf(ev["summary"], `Use tool ${String(ev["name"])}`)}`;
    const d = ctx.approve ? await ctx.approve({ name: textOf(ev["name"], "tool"), risk, summary, arguments: {} }) : "approve";
    if (d === "cancelled") return;
    conv.conn.notify("approval.resolve", { session_id: conv.nestedSession, approval_id: ev["approval_id"], approved: d === "approve" });
  }

  /**
   * Ends a conversation: closes its input, stops its process group, removes its record. Every caller gets the one
   * ending, settled when all of that is done.
   */
  private end(conv: Conversation): Promise<void> {
    if (this.conversations.get(conv.name) === conv) {
      this.conversations.delete(conv.name);
      if (conv.idle !== null) clearTimeout(conv.idle);
      conv.child.stdin.end();
      conv.ending = stopRun(this.o.home, conv.record)
        .catch(() => undefined)
        .then(() => conv.exited);
    }
    return conv.ending ?? Promise.resolve();
  }

  /** Ends the conversations of a session that closed. */
  async closeSession(sessionId: string): Promise<void> {
    await this.jobs.closeSession(sessionId);
    await Promise.all([...this.conversations.values()].filter((c) => c.sessionId === sessionId).map((c) => this.end(c)));
  }

  async close(): Promise<void> {
    await this.jobs.close();
    await Promise.all([...this.conversations.values()].map((c) => this.end(c)));
  }
}
