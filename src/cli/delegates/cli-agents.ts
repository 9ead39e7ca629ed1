/**
 * CLI coding agents as delegated agents: `agent_codex` (`codex exec --json -o <file> … -`), `agent_claude`
 * (`claude -p --output-format stream-json --verbose --session-id <uuid> …`), `agent_pi` (`pi -p --mode json …`).
 *
 * Contract (every agent):
 * - Offered only when its executable resolves on PATH when the turn's tools are built.
 * - Fixed argument vectors: the model supplies only the prompt, `cwd` (inside the session's workspace), `model`,
 *   `effort` (Codex only: `low` `medium` `high`), `session` (a conversation handle such as `codex-1` to resume)
 *   and `timeout_seconds`.
 * - Environment: the caller's without any `*_API_KEY` and provider variables, with the agent's private home
 *   (`CODEX_HOME`, `CLAUDE_CONFIG_DIR`, `PI_CODING_AGENT_DIR` = `$MC_HOME/adapters/<agent>`), `SCV_PARENT` and
 *   `SCV_DELEGATION_DEPTH`. The process runs in its own group under a delegation record; it ends by TERM → 2 s →
 *   KILL of the group on cancel, timeout, or exit. The call ends with the agent process (its output is read for
 *   `STDOUT_DRAIN_MS` after it exits), not when every process holding its stdout let go (process-end.ts).
 * - Progress lines from its event stream (`$ <command>`, `update <path>`, `tool <name>`, `search <q>`), single
 *   lines of at most 200 bytes with credential-like values redacted.
 * - Result: `{agent, status, reply, usage, exit_code, stderr_tail, truncated, session, turn}`, at most a tool result's
 *   bound as a whole: a longer reply is cut to fit, with `reply_bytes`, `reply_omitted_bytes` and `note` (reply-fit.ts).
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, rm, stat } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";
import { redactSecrets, sanitizeText } from "../../core/text-policy.js";
import { truncateUtf8 } from "../../core/utf8.js";
import type { SessionToolContext } from "../../runtime/agent.js";
import { newHandle, processStart, stopRun, writeRecord, type DelegationRecord } from "../../runtime/delegation/records.js";
import { defineLocalTool } from "../../runtime/tools/define.js";
import type { Tool, ToolContext, ToolResult } from "../../runtime/types.js";
import { instanceOf } from "./agent-berth.js";
import { JsonLines, readReplyFile } from "./agent-output.js";
import { fitAgentResult, RESULT_BOUND } from "./reply-fit.js";
import { MAX_RESULT_BYTES } from "../../runtime/tools/result.js";
import { ExecutableResolver } from "./executables.js";
import { processEnded } from "./process-end.js";
import { echoed, jobRef, type JobBook } from "./jobs.js";
import { textOf } from "../../core/json-text.js";
import { CLI_DEFAULT_TIMEOUT_SECONDS as DEFAULT_TIMEOUT_SECONDS, CLI_LABELS, cliAgentDef, promptRefusal } from "./tool-defs.js";

/** How much of the `-o` reply file is read: more never fits a tool result. */
const MAX_REPLY_READ_BYTES = MAX_RESULT_BYTES;
const STDERR_TAIL_BYTES = 2048;
/**
 * How much of stderr is kept (between this and twice it) and redacted before its last `STDERR_TAIL_BYTES` are taken.
 * Redacting only the cut tail let a credential the cut went through show its end (the pattern needs its start).
 */
const STDERR_WINDOW_BYTES = 8192;

/** The redacted last `STDERR_TAIL_BYTES` of an agent's stderr: redacted whole, then cut on a character boundary. */
export function stderrTail(kept: Buffer): string {
  const text = Buffer.from(redactSecrets(sanitizeText(kept.toString("utf8"))));
  return text.subarray(Math.max(0, text.length - STDERR_TAIL_BYTES)).toString("utf8").replace(/^\uFFFD+/, "");
}
const MAX_LINE_BYTES = 200;
const MAX_EVENT_LINE_BYTES = 1 << 20;

/** Provider variables a delegated CLI never inherits (it signs in through its own private home). */
const PROVIDER_VARS = /(_API_KEY|_AUTH_TOKEN|_ACCESS_TOKEN)$|^(OPENAI|ANTHROPIC|AZURE_OPENAI|GEMINI|GOOGLE|OPENROUTER|MC|CLAUDE|PI)_|^CODEX_HOME$|^SCV_HOME$/;

export function progressLine(s: string): string {
  return truncateUtf8(redactSecrets(sanitizeText(s).replace(/\s+/g, " ").trim()), MAX_LINE_BYTES);
}

/** One Codex `exec --json` event → a progress line, the thread ID, the reply, the usage or a failure. */
export function codexEvent(ev: Record<string, unknown>): ParsedEvent {
  const item = (ev["item"] ?? {}) as Record<string, unknown>;
  switch (ev["type"]) {
    case "thread.started":
      return typeof ev["thread_id"] === "string" ? { thread: ev["thread_id"] } : {};
    case "item.started":
      if (item["type"] === "command_execution" && typeof item["command"] === "string") return { progress: `$ ${item["command"]}` };
      return {};
    case "item.completed":
      switch (item["type"]) {
        case "agent_message":
          return typeof item["text"] === "string" ? { reply: item["text"] } : {};
        case "file_change": {
          const paths = Array.isArray(item["changes"]) ? (item["changes"] as Array<Record<string, unknown>>).map((c) => textOf(c["path"])).filter((p) => p !== "") : [];
          return paths.length > 0 ? { progress: `update ${paths.join(", ")}` } : {};
        }
        case "mcp_tool_call":
          return { progress: `tool ${textOf(item["server"], "?")}.${textOf(item["tool"], "?")}` };
        case "web_search":
          return typeof item["query"] === "string" ? { progress: `search ${item["query"]}` } : {};
        default:
          return {};
      }
    case "turn.completed": {
      const u = (ev["usage"] ?? {}) as Record<string, unknown>;
      const usage: Record<string, number> = {};
      for (const k of ["input_tokens", "cached_input_tokens", "output_tokens"]) if (typeof u[k] === "number") usage[k] = u[k];
      return { usage };
    }
    case "turn.failed":
    case "error": {
      const e = ev["error"] as Record<string, unknown> | undefined;
      return { failed: textOf(e?.["message"], textOf(ev["message"], "codex reported an error")) };
    }
    default:
      return {};
  }
}

export type ParsedEvent = { progress?: string; thread?: string; reply?: string; usage?: Record<string, number>; failed?: string; denied?: string[] };

/** At most this many of an agent's refused tool calls are reported (`denied`), each at most 200 bytes. */
export const MAX_DENIED = 20;

function toolLine(name: string, input: Record<string, unknown> | undefined): string {
  const n = name.toLowerCase();
  const str = (k: string): string | null => (typeof input?.[k] === "string" ? (input[k]) : null);
  if (n === "bash" && str("command") !== null) return `$ ${str("command")}`;
  if (["edit", "write", "multiedit"].includes(n) && (str("file_path") ?? str("path")) !== null) return `update ${str("file_path") ?? str("path")}`;
  if (["websearch", "web_search"].includes(n) && str("query") !== null) return `search ${str("query")}`;
  return `tool ${name}`;
}

function numbers(u: unknown, keys: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  const o = (u ?? {}) as Record<string, unknown>;
  for (const k of keys) if (typeof o[k] === "number") out[k] = o[k];
  return out;
}

/** One Claude Code `stream-json` line (`system`, `assistant`, `user`, `result`). */
export function claudeEvent(ev: Record<string, unknown>): ParsedEvent {
  const msg = (ev["message"] ?? {}) as Record<string, unknown>;
  switch (ev["type"]) {
    case "system":
      return typeof ev["session_id"] === "string" ? { thread: ev["session_id"] } : {};
    case "assistant": {
      const content = Array.isArray(msg["content"]) ? (msg["content"] as Array<Record<string, unknown>>) : [];
      const tool = content.find((c) => c["type"] === "tool_use");
      const text = content.filter((c) => c["type"] === "text").map((c) => textOf(c["text"])).join("");
      return { ...(tool !== undefined ? { progress: toolLine(textOf(tool["name"], "tool"), tool["input"] as Record<string, unknown> | undefined) } : {}), ...(text !== "" ? { reply: text } : {}) };
    }
    case "result": {
      const out: ParsedEvent = { usage: numbers(ev["usage"], ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]) };
      if (typeof ev["session_id"] === "string") out.thread = ev["session_id"];
      if (typeof ev["result"] === "string") out.reply = ev["result"];
      if (ev["is_error"] === true || (typeof ev["subtype"] === "string" && ev["subtype"] !== "success")) out.failed = `claude ended with ${textOf(ev["subtype"], "an error")}`;
      if (Array.isArray(ev["permission_denials"])) {
        const denied = (ev["permission_denials"] as unknown[])
          .filter((d): d is Record<string, unknown> => typeof d === "object" && d !== null)
          .slice(0, MAX_DENIED)
          // Redacted before the cut: a cut through a credential leaves a piece the redaction no longer recognises.
          .map((d) => truncateUtf8(redactSecrets(sanitizeText(toolLine(textOf(d["tool_name"], "tool"), d["tool_input"] as Record<string, unknown> | undefined))), 200));
        if (denied.length > 0) out.denied = denied;
      }
      return out;
    }
    default:
      return {};
  }
}

/** One pi `--mode json` line (`session`, `tool_execution_start`, `message_end`, …). */
export function piEvent(ev: Record<string, unknown>): ParsedEvent {
  switch (ev["type"]) {
    case "session":
      return typeof ev["id"] === "string" ? { thread: ev["id"] } : {};
    case "tool_execution_start":
      return { progress: toolLine(textOf(ev["toolName"], "tool"), ev["args"] as Record<string, unknown> | undefined) };
    case "message_end": {
      const m = (ev["message"] ?? {}) as Record<string, unknown>;
      if (m["role"] !== "assistant") return {};
      const content = Array.isArray(m["content"]) ? (m["content"] as Array<Record<string, unknown>>) : [];
      const text = content.filter((c) => c["type"] === "text").map((c) => textOf(c["text"])).join("");
      const out: ParsedEvent = { usage: numbers(m["usage"], ["input", "output", "cacheRead", "cacheWrite"]) };
      if (text !== "") out.reply = text;
      if (m["stopReason"] === "error" || m["stopReason"] === "aborted") out.failed = `pi ended with ${String(m["stopReason"])}${typeof m["errorMessage"] === "string" ? `: ${m["errorMessage"]}` : ""}`;
      return out;
    }
    default:
      return {};
  }
}

/** How one CLI is run and read. */
interface CliSpec {
  agent: "codex" | "claude" | "pi";
  homeVar: string;
  label: string;
  /** Arguments after the executable; `resume` is the conversation's thread/session ID, `fresh` a new UUID. */
  argv(o: { out: string; cwd: string; model?: string | undefined; effort?: string | undefined; resume: string | null; fresh: string; prompt: string }): string[];
  /** The prompt goes on stdin (else it is the last argument). */
  stdin: boolean;
  /** `-o <file>` holds the final message. */
  outFile: boolean;
  parse(ev: Record<string, unknown>): ParsedEvent;
  effort: boolean;
}

/** A prompt that would read as an option (`-…`) or a pi file reference (`@…`) gets a leading space. */
const positional = (p: string): string => (/^[-@]/.test(p) ? ` ${p}` : p);

export const CLI_SPECS: Record<"codex" | "claude" | "pi", CliSpec> = {
  codex: {
    agent: "codex",
    homeVar: "CODEX_HOME",
    label: CLI_LABELS.codex,
    argv: (o) => [
      "exec",
      "--json",
      "-o",
      o.out,
      "--skip-git-repo-check",
      "-C",
      o.cwd,
      ...(o.model !== undefined ? ["-m", o.model] : []),
      ...(o.effort !== undefined ? ["-c", `model_reasoning_effort="${o.effort}"`] : []),
      ...(o.resume !== null ? ["resume", o.resume] : []),
      "-",
    ],
    stdin: true,
    outFile: true,
    parse: codexEvent,
    effort: true,
  },
  claude: {
    agent: "claude",
    homeVar: "CLAUDE_CONFIG_DIR",
    label: CLI_LABELS.claude,
    argv: (o) => [
      "-p",
      "--output-format",
      "stream-json",
      "--verbose",
      "--permission-mode",
      "acceptEdits",
      ...(o.resume !== null ? ["--resume", o.resume] : ["--session-id", o.fresh]),
      ...(o.model !== undefined ? ["--model", o.model] : []),
    ],
    stdin: true,
    outFile: false,
    parse: claudeEvent,
    effort: false,
  },
  pi: {
    agent: "pi",
    homeVar: "PI_CODING_AGENT_DIR",
    label: CLI_LABELS.pi,
    argv: (o) => ["-p", "--mode", "json", ...(o.resume !== null ? ["--session", o.resume] : []), ...(o.model !== undefined ? ["--model", o.model] : []), positional(o.prompt)],
    stdin: false,
    outFile: false,
    parse: piEvent,
    effort: false,
  },
};


export interface CliAgentsOptions {
  jobs: JobBook;
  home: string;
  env: NodeJS.ProcessEnv;
}

export class CliAgents {
  /** Conversation handle → the agent's thread/session ID, per session. */
  private readonly threads = new Map<string, { sessionId: string; thread: string; turns: number }>();
  private readonly next = new Map<string, number>();
  /** PATH lookups cached across turns (see executables.ts for when a change is seen). */
  private readonly exes = new ExecutableResolver();

  constructor(private readonly o: CliAgentsOptions) {}

  tools(s: SessionToolContext, maxDepth: number): Tool[] {
    if (s.depth + 1 > maxDepth) return [];
    this.o.jobs.bind(s.sessionId, s.earlierJobs);
    const out: Tool[] = [];
    const specs = Object.values(CLI_SPECS);
    const exes = this.exes.resolve(specs.map((spec) => spec.agent), this.o.env["PATH"]);
    specs.forEach((spec, i) => {
      const exe = exes[i];
      if (exe !== undefined && exe !== null) out.push(this.tool(s, exe, spec));
    });
    return out;
  }

  forgetSession(sessionId: string): void {
    for (const [k, v] of this.threads) if (v.sessionId === sessionId) this.threads.delete(k);
  }

  private tool(s: SessionToolContext, exe: string, spec: CliSpec): Tool {
    const name = `agent_${spec.agent}`;
    return defineLocalTool({
      ...cliAgentDef(spec.agent),
      execute: async (args, ctx) => {
        const bad = (m: string): ToolResult => ({ content: `${name}: ${m}`, isError: true, errorKind: "invalid_arguments" });
        const long = promptRefusal(name, args.prompt);
        if (long !== null) return long;
        if (args.effort !== undefined && !spec.effort) return bad("`effort` is not supported by this agent");
        if (args.effort !== undefined && !["low", "medium", "high"].includes(args.effort)) return bad("`effort` must be low, medium or high");
        const cwd = resolve(s.cwd, args.cwd ?? ".");
        const rel = relative(s.cwd, cwd);
        if (rel.startsWith("..") || isAbsolute(rel)) return bad("`cwd` must be inside the workspace");
        if (!(await stat(cwd).then((st) => st.isDirectory(), () => false))) return bad("`cwd` is not a directory");
        let conv: { sessionId: string; thread: string; turns: number } | undefined;
        if (args.session !== undefined) {
          conv = this.threads.get(args.session);
          if (conv === undefined || conv.sessionId !== s.sessionId || !args.session.startsWith(`${spec.agent}-`)) return bad(`no conversation ${echoed(args.session)} in this session`);
        }
        if (args.background !== true) return this.run(s, exe, spec, { ...args, cwd }, args.session ?? null, conv ?? null, ctx);
        const full = this.o.jobs.refusal(s.sessionId, name);
        if (full !== null) return full;
        const job = this.o.jobs.start(s.sessionId, name, args.prompt, (signal) =>
          this.run(s, exe, spec, { ...args, cwd }, args.session ?? null, conv ?? null, { cwd: ctx.cwd, signal, onProgress: () => undefined }),
        );
        return { content: JSON.stringify({ job: job.id, status: "running" }), isError: false, jobs: [jobRef(job)] };
      },
    });
  }

  private async run(
    s: SessionToolContext,
    exe: string,
    spec: CliSpec,
    args: { prompt: string; cwd: string; model?: string | undefined; effort?: string | undefined; timeout_seconds?: number | undefined },
    name: string | null,
    conv: { sessionId: string; thread: string; turns: number } | null,
    ctx: ToolContext,
  ): Promise<ToolResult> {
    const agentHome = join(this.o.home, "adapters", spec.agent);
    await mkdir(agentHome, { recursive: true, mode: 0o700 });
    const handle = newHandle(spec.agent);
    const out = join(agentHome, `.last-${handle}.txt`);
    const depth = s.depth + 1;
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(this.o.env)) if (v !== undefined && !PROVIDER_VARS.test(k)) env[k] = v;
    Object.assign(env, { [spec.homeVar]: agentHome, SCV_PARENT: `${instanceOf(this.o.home)}/${s.sessionId}/${handle}`, SCV_DELEGATION_DEPTH: String(depth) });
    const argv = spec.argv({ out, cwd: args.cwd, model: args.model, effort: args.effort, resume: conv?.thread ?? null, fresh: randomUUID(), prompt: args.prompt });
    const child = spawn(exe, argv, { cwd: args.cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    child.stdin.on("error", () => undefined);
    child.stdin.end(spec.stdin ? args.prompt : undefined);
    // Ends with the agent process, not with the last holder of its pipes (process-end.ts).
    const exited = processEnded(child);
    // Read the streams from the start: Node drains (discards) the output of a child that exits while nobody
    // listens, which an agent that ends quickly does while the record below is still being written.
    let thread = conv?.thread ?? null;
    let reply = "";
    let usage: Record<string, number> = {};
    let failure: string | null = null;
    let denied: string[] = [];
    const lines = new JsonLines(MAX_EVENT_LINE_BYTES, (line) => {
      let ev: unknown;
      try {
        ev = JSON.parse(line.toString("utf8"));
      } catch {
        return;
      }
      if (ev === null || typeof ev !== "object") return;
      const r = spec.parse(ev as Record<string, unknown>);
      if (r.thread !== undefined) thread = r.thread;
      if (r.reply !== undefined) reply = r.reply;
      if (r.usage !== undefined) usage = r.usage;
      if (r.failed !== undefined) failure = r.failed;
      if (r.denied !== undefined) denied = r.denied.map((d) => redactSecrets(sanitizeText(d)));
      if (r.progress !== undefined) ctx.onProgress(progressLine(r.progress));
    });
    child.stdout.on("data", (chunk: Buffer) => lines.push(chunk));
    let stderr = Buffer.alloc(0);
    child.stderr.on("data", (c: Buffer) => {
      stderr = Buffer.concat([stderr, c]);
      if (stderr.length > STDERR_WINDOW_BYTES * 2) stderr = stderr.subarray(stderr.length - STDERR_WINDOW_BYTES);
    });
    const turn = (conv?.turns ?? 0) + 1;
    const n = (this.next.get(spec.agent) ?? 0) + 1;
    if (name === null) this.next.set(spec.agent, n);
    const convName = name ?? `${spec.agent}-${n}`;
    const record: DelegationRecord = {
      handle,
      agent: spec.agent,
      instance: instanceOf(this.o.home),
      session: s.sessionId,
      depth,
      pid: child.pid ?? 0,
      pid_start: child.pid !== undefined ? await processStart(child.pid) : null,
      owner_pid: process.pid,
      owner_start: await processStart(process.pid),
      cwd: args.cwd,
      started_unix_seconds: Math.floor(Date.now() / 1000),
      conversation: convName,
      turn,
    };
    if (child.pid !== undefined) await writeRecord(this.o.home, record).catch(() => undefined);

    let ended: "cancelled" | "timeout" | null = null;
    const stop = (why: "cancelled" | "timeout"): void => {
      ended ??= why;
      void stopRun(this.o.home, record);
    };
    const onAbort = (): void => stop("cancelled");
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    // Cancelled while it was starting (the session closed, agent_cancel, the turn cancelled): an aborted signal never
    // fires its listener, so the agent ran on to its time limit and the session's close waited for it.
    if (ctx.signal.aborted) onAbort();
    const timer = setTimeout(() => stop("timeout"), (args.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS) * 1000);
    const code = await exited;
    clearTimeout(timer);
    ctx.signal.removeEventListener("abort", onAbort);
    await stopRun(this.o.home, record).catch(() => undefined);
    // Read to the bound, never whole: a huge file cost its size in memory, and past ~512 MB the read failed and the
    // reply silently fell back to the last streamed message.
    const last = spec.outFile ? await readReplyFile(out, MAX_REPLY_READ_BYTES) : null;
    await rm(out, { force: true });
    let replySize = Buffer.byteLength(reply);
    if (last !== null && last.text.trim() !== "") {
      reply = last.text;
      replySize = last.size;
    }
    if (thread !== null) this.threads.set(convName, { sessionId: s.sessionId, thread, turns: turn });
    const status = (ended as "cancelled" | "timeout" | null) ?? (code === 0 && failure === null ? "completed" : "failed");
    const body = {
      agent: spec.agent,
      status,
      reply,
      usage,
      exit_code: code,
      stderr_tail: stderrTail(stderr),
      truncated: false,
      ...(thread !== null ? { session: convName, turn } : {}),
      ...(failure !== null ? { error: truncateUtf8(redactSecrets(failure), 1024) } : {}),
      ...(denied.length > 0 ? { denied } : {}),
      ...(replySize > Buffer.byteLength(reply) ? { reply_bytes: replySize } : {}),
    };
    // Bounded as a whole (the reply cut to fit, saying so): the tool result bound would cut it through its JSON.
    const content = fitAgentResult(body, RESULT_BOUND) ?? JSON.stringify({ ...body, reply: "", stderr_tail: "", truncated: true });
    const kind = status === "completed" ? undefined : status === "cancelled" ? "cancelled" : status === "timeout" ? "limit" : code === null && failure === null ? "unavailable" : "failed";
    return { content, isError: status !== "completed", ...(kind !== undefined ? { errorKind: kind } : {}) };
  }
}
