/**
 * A long text cut to its head and tail for display (the web UI's tool cards: a build's 100,000 lines of output, a
 * 1 MB file a `write` call carries), with what was left out counted. Pure.
 *
 * Contract: text of at most `head + tail` UTF-16 units comes back whole (`cut` undefined). Longer text keeps at most
 * `head` units from its start and `tail` from its end, cut after a line break when there is one in the last quarter
 * of that window (so the cut-out middle is whole lines), else at the window's edge without splitting a surrogate
 * pair. `cut` says how much was left out: lines when both cuts are at line breaks, else characters (UTF-16 units).
 */
export interface Clipped {
  head: string;
  tail: string;
  cut?: { lines?: number; chars: number };
}

export const CLIP_HEAD = 12_000;
export const CLIP_TAIL = 12_000;

const isLow = (text: string, i: number): boolean => {
  const c = text.charCodeAt(i);
  return c >= 0xdc00 && c <= 0xdfff;
};

export function clipText(text: string, head = CLIP_HEAD, tail = CLIP_TAIL): Clipped {
  if (text.length <= head + tail) return { head: text, tail: "" };
  const nl = text.lastIndexOf("\n", head - 1);
  const headAtLine = nl >= head - Math.ceil(head / 4);
  let headEnd = headAtLine ? nl + 1 : head;
  if (!headAtLine && isLow(text, headEnd)) headEnd--;
  const from = text.length - tail;
  const nl2 = text.indexOf("\n", from - 1);
  const tailAtLine = nl2 !== -1 && nl2 < from - 1 + Math.ceil(tail / 4);
  let tailStart = tailAtLine ? nl2 + 1 : from;
  if (!tailAtLine && isLow(text, tailStart)) tailStart++;
  const middle = text.slice(headEnd, tailStart);
  let lines: number | undefined;
  if (headAtLine && tailAtLine) {
    lines = 0;
    for (let i = middle.indexOf("\n"); i !== -1; i = middle.indexOf("\n", i + 1)) lines++;
  }
  return { head: text.slice(0, headEnd), tail: text.slice(tailStart), cut: { ...(lines !== undefined ? { lines } : {}), chars: middle.length } };
}

/** What `clipText` left out, for the note in its place: "24,512 lines not shown". */
export function cutNote(cut: NonNullable<Clipped["cut"]>): string {
  const n = (x: number) => x.toLocaleString("en-US");
  const [count, unit] = cut.lines !== undefined ? [cut.lines, "line"] : [cut.chars, "character"];
  return `${n(count)} ${unit}${count === 1 ? "" : "s"} not shown`;
}
