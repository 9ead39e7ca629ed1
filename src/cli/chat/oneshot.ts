/**
 * `berth chat -p PROMPT [--json] [--session ID | --continue] [--yolo]`: one turn over SCV, then exit.
 * Contract: stdout gets only the final answer (the last assistant message; for a cancelled or failed turn the text
 * accepted so far) or, with `--json`, one JSON object per turn event (`turn.started`, `turn.assistant_delta`,
 * `turn.tool`, `turn.approval`, `turn.terminal`). stderr gets the session ID (`session <id>`) and, on failure,
 * one line naming the cause. Approvals follow the policy: what would ask is denied (and said on stderr) unless
 * `--yolo`. A closed stdout (EPIPE) ends the run quietly.
 * Exit codes: 0 completed; 1 failed or setup/protocol error; 130 cancelled (Ctrl-C; 143 SIGTERM, 129 SIGHUP); 2 usage.
 * Transport: a running daemon's socket, else the SCV server in this process (link.ts; docs/chat.md, Transport).
 * MCP servers of the session that failed to start are reported on stderr, one line each (name and the runtime's
 * one-line cause, never the server's own output): as soon as known during the turn (followed from its first event
 * after `turn.started`), else after it, waiting at most `MCP_REPORT_AFTER_TURN_MS` for servers still starting.
 */
import { describeError, failureLine } from "./common.js";
import { openLink, type Link } from "./link.js";
import { renderMarkdown } from "./markdown.js";
import { preflight } from "./preflight.js";
import { NO_PROVIDER_HELP } from "./render.js";
import { textOf } from "../../core/json-text.js";
import { ScvConnectionError, type ScvClient, type ScvEvent } from "../../client/scv/client.js";
import { sessionMcp, settle } from "./session-tools.js";
import { jsonLine, terminalSafe } from "../terminal-safe.js";
import { chosenHere, openChosen } from "./selection.js";
import { mark } from "../../runtime/debug-timing.js";

/** How long `-p` waits after its turn for MCP servers still starting, to report those that fail. */
export const MCP_REPORT_AFTER_TURN_MS = 3_000;
/** How long the report follows servers during the turn (beyond the runtime's 30 s connect budget). */
const MCP_REPORT_MS = 35_000;

/**
 * Reports the session's MCP servers that failed to start, each once: follows them from the session's start;
 * `finish()` (after the turn) waits at most `MCP_REPORT_AFTER_TURN_MS` more for those still starting.
 */
function mcpReport(client: ScvClient, sessionId: string, expected: number, err: (s: string) => void): { finish(): Promise<void> } {
  const told = new Set<string>();
  const report = (servers: Array<{ name: string; state: string; error: string | null }>): void => {
    for (const sv of servers)
      if (sv.state === "failed" && !told.has(sv.name)) {
        told.add(sv.name);
        err(`MCP server ${sv.name} failed to start${sv.error !== null ? `: ${sv.error}` : ""}; check its entry under mcp_servers in settings`);
      }
  };
  if (expected === 0) return { finish: () => Promise.resolve() };
  let settled = false;
  void settle(client, sessionId, expected, MCP_REPORT_MS)
    .then((servers) => {
      settled = servers.every((sv) => sv.state !== "starting");
      report(servers);
    })
    .catch(() => undefined);
  return {
    async finish() {
      const until = Date.now() + MCP_REPORT_AFTER_TURN_MS;
      while (!settled) {
        const servers = await sessionMcp(client, sessionId).catch(() => null);
        if (servers === null) return;
        report(servers);
        if ((servers.length >= expected && servers.every((sv) => sv.state !== "starting")) || Date.now() >= until) return;
        await new Promise((resolve) => setTimeout(resolve, 50).unref());
      }
    },
  };
}

export interface OneShotOptions {
  prompt: string;
  json: boolean;
  /** A session ID or unique prefix to continue. */
  sessionId: string | null;
  continueLatest: boolean;
  yolo: boolean;
  home: string;
  /** The connection, when the caller already started opening it (else it is opened here). */
  linking?: Promise<Link>;
  /** Registers what a closed stdout (EPIPE) does while the one-shot runs (else the caller exits at once). */
  onStdoutClosed?: (stop: () => void) => void;
}

export async function runOneShot(o: OneShotOptions): Promise<number> {
  let link: Link | null = null;
  let interrupted = 0;
  let cancel: (() => void) | null = null;
  /** The exit code of the signal that cancelled the turn: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP). */
  let signalExit = 130;
  // Ctrl-C cancels the turn; SIGTERM and SIGHUP too (the server runs in this process: cancelling lets it record the
  // turn's end and stop the turn's tool processes). A second signal, or one before the turn started, exits at once.
  const signals = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;
  const onSignal = (sig: keyof typeof signals): void => {
    interrupted++;
    if (interrupted === 1) signalExit = signals[sig];
    if (interrupted > 1 || cancel === null) process.exit(signals[sig]);
    cancel();
  };
  for (const sig of Object.keys(signals) as Array<keyof typeof signals>) process.on(sig, onSignal);
  // A closed stdout (`… | head -1`): nothing more can be shown, so the turn is cancelled and the run ends with 0
  // once the server recorded it (before the turn started there is nothing to record).
  let outClosed = false;
  let turnOver = false;
  o.onStdoutClosed?.(() => {
    if (outClosed) return;
    outClosed = true;
    if (turnOver) return;
    if (cancel === null) process.exit(0);
    cancel();
  });
  // Lines here quote the model and servers (a tool's summary, an MCP server's error): shown without terminal controls.
  const err = (s: string): void => void process.stderr.write(`berth chat: ${terminalSafe(s)}\n`);
  // The server runs in this process: a crash in it ends the run with one line (no stack trace, no request data).
  const fatal = (e: unknown): void => {
    err(`the Berth server failed: ${describeError(e)}`);
    process.exit(1);
  };
  process.on("uncaughtException", fatal);
  process.on("unhandledRejection", fatal);
  try {
    const cwd = process.cwd();
    const linking = o.linking ?? openLink(process.env, { inProcess: true });
    linking.catch(() => undefined);
    // The project's MCP servers are read while the settings are checked (the project's warning comes after them).
    const projecting = import("./project.js").then(({ projectMcp }) => projectMcp(o.home, cwd));
    projecting.catch(() => undefined);
    mark("chat.preflight");
    // A key missing here is looked for where the turns run: a daemon's own environment (the link tells).
    const pre = await preflight(process.env, cwd, { keyHere: () => linking.then((l) => l.via !== "daemon", () => true) });
    mark("chat.preflight_done");
    if (!pre.ok) {
      process.stderr.write(pre.noProvider ? `berth chat: ${NO_PROVIDER_HELP}` : `berth chat: ${pre.message}\n`);
      await (await linking.catch(() => null))?.close();
      return 1;
    }
    if (pre.approvalNote !== null) process.stderr.write(`berth chat: ${pre.approvalNote}\n`);
    const yolo = o.yolo || pre.approvalPolicy === "never";
    let resume: string | undefined;
    /** For a resumed session: the note to print when the server continued it outside its recorded directory. */
    let movedNote: ((now: string) => string | null) | null = null;
    if (o.sessionId !== null || o.continueLatest) {
      const { SessionsView, movedWorkspaceNote } = await import("./sessions.js");
      const view = new SessionsView(o.home);
      if (o.sessionId !== null) {
        const r = await view.resolve(o.sessionId);
        if ("error" in r) {
          err(r.error);
          await (await linking.catch(() => null))?.close();
          return 1;
        }
        resume = r.id;
      } else {
        resume = (await view.latestIn(cwd)) ?? undefined;
        // As the interactive chat says it: --continue did not find what it was asked for.
        if (resume === undefined) err("no earlier session in this directory; starting a new one");
      }
      const recorded = resume !== undefined ? await view.cwdOf(resume) : null;
      // The recorded directory could not be used (removed, not a directory): the server continued elsewhere.
      if (recorded !== null) movedNote = (now) => (now !== recorded ? movedWorkspaceNote(recorded, now) : null);
    }
    // Project MCP servers run only in a project the user trusted (in an interactive chat); -p never asks.
    const proj = await projecting;
    if (proj !== null && !proj.trusted) err("this project's MCP servers (.berth/settings.json) were not started: run berth chat here once to trust the project");
    const mcp = proj?.trusted === true ? { ...(pre.layers.global.mcp_servers ?? {}), ...proj.servers } : null;
    const mcpCount = Object.keys(mcp ?? pre.layers.global.mcp_servers ?? {}).length;
    link = await linking;
    mark("chat.linked");
    if (link.note !== null) err(link.note);
    const client = link.client;
    // The user's MC_PROVIDER / MC_MODEL run whoever serves (a daemon's own selection included).
    const chosen = chosenHere(process.env, pre);
    const started = await openChosen(link, { cwd, auto_approve: yolo, ...(resume !== undefined ? { resume } : {}), ...(mcp !== null ? { mcp_servers: mcp } : {}) }, chosen);
    const sessionId = started["session_id"] as string;
    const moved = movedNote !== null && typeof started["cwd"] === "string" ? movedNote(started["cwd"]) : null;
    if (moved !== null) err(moved);
    // Followed from the turn's first event on (asking before it would delay the turn's start).
    let report: { finish(): Promise<void> } | null = null;
    const mcpFailures = (): { finish(): Promise<void> } => (report ??= mcpReport(client, sessionId, mcpCount, err));
    const out = (s: string): void => void (outClosed || process.stdout.write(s));
    const json = (v: Record<string, unknown>): void => out(jsonLine(v));
    const args = new Map<string, unknown>();
    let last = "";
    let current = "";
    let turnId: unknown;
    const turn = client.startTurn(sessionId, o.prompt, (ev) => {
      const seq = ev["seq"];
      if (ev.type !== "turn.started") mcpFailures();
      switch (ev.type) {
        case "turn.started":
          turnId = ev["turn_id"];
          if (o.json) json({ event: "turn.started", turn_id: ev["turn_id"], session_id: sessionId, sequence: seq });
          break;
        case "assistant.delta":
          current += textOf(ev["content"]);
          if (o.json) json({ event: "turn.assistant_delta", turn_id: ev["turn_id"], sequence: seq, text: ev["content"] });
          break;
        case "assistant.completed":
          if (typeof ev["content"] === "string" && ev["content"] !== "") last = ev["content"];
          current = "";
          break;
        case "tool.proposed":
          args.set(String(ev["call_id"]), ev["arguments"]);
          if (o.json) json({ event: "turn.tool", status: "proposed", turn_id: ev["turn_id"], sequence: seq, call_id: ev["call_id"], name: ev["name"], arguments: ev["arguments"] });
          break;
        case "tool.started":
        case "tool.completed":
          if (o.json)
            json({
              event: "turn.tool",
              status: ev.type === "tool.started" ? "started" : ev["success"] === true ? "completed" : textOf(ev["error"], "failed"),
              turn_id: ev["turn_id"],
              sequence: seq,
              call_id: ev["call_id"],
              name: ev["name"],
            });
          break;
        case "approval.requested": {
          client.resolveApproval(sessionId, String(ev["approval_id"]), yolo);
          if (o.json) json({ event: "turn.approval", turn_id: ev["turn_id"], sequence: seq, call_id: ev["call_id"], name: ev["name"], summary: ev["summary"], approved: yolo });
          if (!yolo) err(`denied ${String(ev["name"])} (${textOf(ev["summary"]).slice(0, 120)}): -p denies tools that would ask for approval; add --yolo to approve them`);
          break;
        }
        default:
          break;
      }
    });
    cancel = () => turn.cancel();
    if (interrupted > 0) cancel();
    let end: ScvEvent;
    try {
      end = await turn.done;
    } catch (e) {
      // The server went away mid-turn (a daemon stopped or killed): the turn ends as failed, with its text so far
      // and the terminal line, like any other failure.
      if (!(e instanceof ScvConnectionError)) throw e;
      const message = `the Berth server stopped during the turn (${e.message}); the session keeps the answer so far: berth chat --session ${sessionId} continues it`;
      end = { type: "turn.failed", code: "server_stopped", message, turn_id: turnId };
    }
    turnOver = true;
    if (end.type === "error") {
      err(`the server refused the prompt (${String(end["code"])}: ${textOf(end["message"])})`);
      return 1;
    }
    const text = current !== "" ? current : last;
    const status = end.type === "turn.completed" ? "completed" : end.type === "turn.cancelled" ? "cancelled" : "failed";
    if (o.json)
      json({
        event: "turn.terminal",
        status,
        session_id: sessionId,
        turn_id: end["turn_id"],
        sequence: end["seq"],
        assistant_text: text,
        ...(status === "failed" ? { code: end["code"], message: end["message"] } : {}),
        ...(end["usage"] !== undefined ? { usage: end["usage"] } : {}),
      });
    // On a terminal the answer is shown without its terminal controls (escape sequences, C1 and bidi controls): a
    // model's or a tool's text must not retitle the window, write the clipboard (OSC 52) or hide text; the renderer
    // shows them, and ends a line at a CR. A pipe gets it raw.
    else if (text.length > 0 && process.stdout.isTTY === true) out(renderMarkdown(text, process.env.NO_COLOR === undefined));
    else if (text.length > 0) out(text.endsWith("\n") ? text : text + "\n");
    // After the answer: a server that failed while a fast turn ran is still reported (not after Ctrl-C).
    if (outClosed) return 0;
    if (status !== "cancelled") await mcpFailures().finish();
    process.stderr.write(`session ${sessionId}\n`);
    if (status === "completed") return 0;
    err(`the turn ${failureLine(end, pre.baseUrl, { partial: text.length > 0, how: `berth chat --session ${sessionId} continues it` })}`);
    if (status === "failed") {
      const { failureHints } = await import("./hints.js");
      for (const h of await failureHints(textOf(end["message"]), process.env, cwd, link.via)) err(h.replace(/^error: /, ""));
    }
    return status === "cancelled" ? signalExit : 1;
  } catch (e) {
    err(describeError(e));
    return 1;
  } finally {
    for (const sig of Object.keys(signals) as Array<keyof typeof signals>) process.off(sig, onSignal);
    process.off("uncaughtException", fatal);
    process.off("unhandledRejection", fatal);
    await link?.close();
  }
}
