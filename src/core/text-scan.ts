/**
 * String scans that stay linear on hostile text where the obvious regular expression does not. Pure.
 *
 * Why: a pattern that needs something after a run, such as `/[ \t]+$/` (the end) or whitespace around a line break,
 * is retried from every position of a long run that is not followed by what it needs, and each try rescans the rest
 * of the run: 40 kB of spaces before a letter took 1.4 s, of `!` before a letter 3 s. The text here comes from web
 * pages (`web_fetch`) and chat senders, so it is an attacker's, and these calls run on the event loop every session
 * shares.
 */

/** `s` without its trailing characters that are in `chars` (`trimEndChars("ok!!", "!")` is `"ok"`). */
export function trimEndChars(s: string, chars: string): string {
  let end = s.length;
  while (end > 0 && chars.includes(s[end - 1]!)) end--;
  return end === s.length ? s : s.slice(0, end);
}

/** `s` with every run of whitespace that holds a line break replaced by one space; runs without one stay. */
export function collapseBreaks(s: string): string {
  return s.includes("\n") ? s.replace(/\s+/g, (run) => (run.includes("\n") ? " " : run)) : s;
}
