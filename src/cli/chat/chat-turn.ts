/**
 * One prompt's turn in the interactive chat: sends it over SCV, renders the events (turn-events.ts) with a live
 * markdown answer and the working indicator, asks approval questions, and ends with one line naming how the turn
 * ended (and, after a failure, what to do about it: hints.ts).
 * Contract: readline's echo is muted while the turn runs (type-ahead is kept, not shown) and unmuted for an
 * approval question and at the end; a pending question is dropped when the turn ends.
 */
import type { RunningTurn } from "../../client/scv/client.js";
import { approvalCard, type ApprovalInfo } from "./approval.js";
import { failureLine, promptTooLarge } from "./common.js";
import type { Connection } from "./connection.js";
import { LiveAnswer } from "./live.js";
import { MarkdownStream } from "./markdown.js";
import { gauge, type Style } from "./render.js";
import type { Screen } from "./screen.js";
import { terminalSafe } from "../terminal-safe.js";
import { turnEvents } from "./turn-events.js";
import { textOf } from "../../core/json-text.js";
import { SelectionRefused } from "./selection.js";

/** What a turn needs from the chat loop. */
export interface TurnHost {
  readonly screen: Screen;
  readonly s: Style;
  readonly color: boolean;
  readonly conn: Connection;
  readonly cwd: string;
  /** The selected provider's base URL (named when it cannot be reached). */
  baseUrl(): string | null;
  /** True when a tool is approved without asking (--yolo, or "always" for that tool). */
  autoApproves(name: string): boolean;
  /** Approves this tool for the rest of the chat. */
  approveAlways(name: string): void;
  /** Writes the question and resolves with the next line typed (trimmed, lower case); "n" when cancelled. */
  question(text: string): Promise<string>;
  /** True while a question waits for its answer. */
  asking(): boolean;
  /** Drops a pending question (the turn ended). */
  dropQuestion(): void;
  /** The turn is running (`null`: it ended). */
  running(turn: RunningTurn | null): void;
  /** The footer's content changed (session, context). */
  refreshFooter(): void;
}

/** How a turn ended: `failure` is a failed turn's message (null for any other end). */
export interface TurnEnd {
  completed: boolean;
  failure: string | null;
}

/** Runs one turn. */
export async function runTurn(h: TurnHost, prompt: string): Promise<TurnEnd> {
  const { screen, s } = h;
  const tooLarge = promptTooLarge(prompt);
  if (tooLarge !== null) {
    screen.line(s.red(`error: ${tooLarge}`));
    return { completed: false, failure: null };
  }
  const session = await h.conn.open().catch((e: unknown) => {
    if (!(e instanceof SelectionRefused)) throw e;
    return e;
  });
  // Refused for the chosen provider: a failure every later prompt meets alike (hints.ts `failsAlike`).
  if (session instanceof SelectionRefused) {
    screen.line(s.red(`error: ${session.message}`));
    return { completed: false, failure: session.message };
  }
  h.refreshFooter();
  const { client, via } = await h.conn.current();
  // Markdown is rendered line by line on a terminal that can redraw; the unfinished line shows raw meanwhile.
  const answer = new LiveAnswer(screen.redraws ? new MarkdownStream(h.color) : null, {
    write: (t) => screen.write(t),
    transient: (t) => screen.transient(t),
    control: (t) => screen.control(t),
    size: () => screen.size(),
  });
  const started = Date.now();
  let turn: RunningTurn | null = null;
  screen.live = () => answer.redrawn();
  if (screen.redraws) {
    screen.spinner.start((frame) => {
      if (!screen.atLineStart || screen.promptShown || h.asking() || turn === null) return null;
      const secs = Math.floor((Date.now() - started) / 1000);
      return s.dim(`${frame} working ${secs}s · ~${Math.round(answer.chars / 4)} tokens · Ctrl-C to cancel`);
    });
  }
  const ask = async (info: ApprovalInfo): Promise<boolean> => {
    // The card quotes the model (a command, a file's new text) and the file as it is: shown without its controls.
    const card = terminalSafe(await approvalCard(info));
    for (const l of card.split("\n")) screen.line(l.startsWith("+") && !l.startsWith("+++") ? s.green(l) : l.startsWith("-") && !l.startsWith("---") ? s.red(l) : l);
    const answerText = await h.question("Allow? [y]es / [n]o / [a]lways for this session › ");
    if (answerText === "a" || answerText === "always") {
      h.approveAlways(info.name);
      screen.line(s.dim(`  · approved; ${terminalSafe(info.name, false)} is approved for the rest of this session`));
      return true;
    }
    const yes = answerText === "y" || answerText === "yes";
    screen.line(s.dim(`  · ${yes ? "approved" : "denied"}`));
    return yes;
  };
  const onEvent = turnEvents(
    {
      write: (t) => screen.write(t),
      line: (t) => screen.line(t),
      status: (t) => screen.line(s.dim(`  · ${t}`)),
      atLineStart: () => screen.atLineStart,
      bold: (t) => s.bold(t),
      autoApproves: (name) => h.autoApproves(name),
      ask,
      resolveApproval: (id, yes) => client.resolveApproval(session.id, id, yes),
      context: (current, max) => {
        h.conn.ctx = { current, max };
        h.refreshFooter();
      },
    },
    session,
    answer,
  );
  turn = client.startTurn(session.id, prompt, onEvent);
  screen.muted = screen.redraws;
  h.running(turn);
  try {
    const end = await turn.done;
    answer.end();
    if (end.type === "error") {
      screen.line(s.red(terminalSafe(`error: the server refused the prompt (${String(end["code"])}: ${textOf(end["message"])})`, false)));
      return { completed: false, failure: null };
    }
    const ctx = h.conn.ctx;
    const g = `${ctx !== null ? ` · ${gauge(ctx.current, ctx.max)}` : ""} · ${terminalSafe(`${session.model ?? "?"} · ${session.cwd}`, false)} · ${session.id.slice(0, 12)}`;
    const label = end.type === "turn.completed" ? "completed" : terminalSafe(failureLine(end, h.baseUrl(), { partial: answer.chars > 0, how: 'send a prompt (such as "continue") to go on' }), false);
    screen.line(s.dim(`── ${end.type === "turn.failed" ? s.red(label) : label}${g}`));
    if (end.type === "turn.failed") {
      const { failureHints } = await import("./hints.js");
      const hints = await failureHints(textOf(end["message"]), process.env, h.cwd, via);
      // A hint of several lines (the setup help) is shown line by line, each without terminal controls.
      for (const l of hints.flatMap((x) => x.split("\n")).map((x) => terminalSafe(x, false))) screen.line(l.startsWith("error: ") ? s.red(l) : l);
    }
    return { completed: end.type === "turn.completed", failure: end.type === "turn.failed" ? textOf(end["message"]) : null };
  } finally {
    turn = null;
    screen.spinner.stop();
    screen.live = null;
    screen.muted = false;
    h.running(null);
    if (h.asking()) h.dropQuestion();
  }
}
