/**
 * The prompt of a report turn (jobs.ts): what Berth tells the model of background jobs that ended unseen.
 *
 * Contract:
 * - The prompt is at most `MAX_REPORT_BYTES` (UTF-8). Before, it held every unseen job's result: a session keeps up
 *   to 64 ended jobs of up to 50 KiB each, so it could reach megabytes, past any prompt bound and the model's window,
 *   and the report turn failed (`context_limit`) with the user never told of the jobs.
 * - When everything fits, each job is a section `Background job <id> (<tool>: <task>) ended: <status>.` and its
 *   result. Else results get the room in the order the jobs were started: a result that fits is whole; the first, when it
 *   does not fit, is cut to fit (a delegated agent's result stays a JSON document whose `note` names the cut and this
 *   bound, reply-fit.ts; other text keeps its start) and its section says so; a later one that does not fit is left
 *   out. The jobs left out are named (with tool, task and status) in one paragraph saying their results did not fit
 *   and to call `agent_status` or `agent_wait` to see them. Room for naming every job but the first is set aside
 *   before the results, so the prompt never passes the bound.
 * - `shown` are the jobs whose result is in the prompt (whole or cut): only those become settled. A job left out
 *   stays unseen: the job tools show its result, or the next report turn does.
 */
import { truncateUtf8 } from "../../core/utf8.js";
import type { Job } from "./jobs.js";
import { refitAgentResult } from "./reply-fit.js";

/** A report turn's prompt at most: as much as one answer of the job tools (jobs.ts `MAX_VIEW_BYTES`). */
export const MAX_REPORT_BYTES = 40 * 1024;
const CLOSING = "Report these results to the user.";

const bytes = (s: string): number => Buffer.byteLength(s);
const label = (j: Job): string => `${j.tool}${j.task !== "" ? `: ${j.task}` : ""}`;
const head = (j: Job, cut: boolean): string => `Background job ${j.id} (${label(j)}) ended: ${j.status}.${cut ? " Its result is cut to fit this message:" : ""}\n`;

/** The paragraph naming the jobs whose results were left out (never shorter for more jobs). */
function leftOut(list: Job[]): string {
  const names = list.map((j) => `${j.id} (${label(j)}, ${j.status})`).join(", ");
  return list.length === 1
    ? `Background job ${names} also ended; its result did not fit in this message (at most ${MAX_REPORT_BYTES} bytes): call agent_status or agent_wait to see it.`
    : `Background jobs ${names} also ended; their results did not fit in this message (at most ${MAX_REPORT_BYTES} bytes): call agent_status or agent_wait to see them.`;
}

/** The report of `ended` (unseen jobs, in the order they were started) and `extra` paragraphs (discarded jobs). */
export function reportPrompt(ended: Job[], extra: string[]): { prompt: string; shown: Job[] } {
  const tail = [...extra, CLOSING].join("\n\n");
  const sections = ended.map((j) => head(j, false) + (j.result?.content ?? ""));
  const whole = [...sections, tail].join("\n\n");
  if (bytes(whole) <= MAX_REPORT_BYTES) return { prompt: whole, shown: ended };
  // Room for the results: the bound less the tail, and the naming of every job but the first (the first is always
  // shown, whole or cut).
  let room = MAX_REPORT_BYTES - bytes(tail) - 2 - (ended.length > 1 ? bytes(leftOut(ended.slice(1))) + 2 : 0);
  const parts: string[] = [];
  const shown: Job[] = [];
  ended.forEach((j, i) => {
    const sep = parts.length > 0 ? 2 : 0;
    let s = sections[i]!;
    if (sep + bytes(s) > room) {
      if (i > 0) return;
      const h = head(j, true);
      const max = room - bytes(h);
      const content = j.result?.content ?? "";
      const fit = refitAgentResult(content, { max, words: `the ${MAX_REPORT_BYTES}-byte report of background jobs` }) ?? truncateUtf8(content, max);
      s = h + (bytes(fit) <= max ? fit : "");
    }
    parts.push(s);
    shown.push(j);
    room -= sep + bytes(s);
  });
  const left = ended.filter((j) => !shown.includes(j));
  return { prompt: [...parts, ...(left.length > 0 ? [leftOut(left)] : []), tail].join("\n\n"), shown };
}
