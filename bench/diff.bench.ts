/**
 * The approval card's diff at its bounds (2,000 lines a side): the time the chat's thread is blocked computing it
 * before the card shows. Cases: one line changed, every fourth line replaced (500 + 500 edits, just under
 * MAX_DIFF_EDITS), every other line replaced and every line replaced (past the cap: the search stops there and the
 * card shows a summary). Target: the worst stays under 50 ms (the former LCS table took 50–90 ms and 16 MB).
 */
import type { Figure } from "./run.js";
import { MAX_DIFF_LINES, unifiedDiff } from "../src/cli/chat/diff.js";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

export default function diffBench(): Promise<Figure[]> {
  const n = MAX_DIFF_LINES;
  const file = (f: (i: number) => string): string => Array.from({ length: n }, (_, i) => f(i)).join("\n") + "\n";
  const base = file((i) => `    const value${i} = compute(${i}); // line ${i}`);
  const cases: Record<string, string> = {
    one_line: base.replace("compute(1000)", "compute(-1)"),
    every_fourth: file((i) => (i % 4 === 0 ? `    replaced ${i}` : `    const value${i} = compute(${i}); // line ${i}`)),
    every_other: file((i) => (i % 2 === 0 ? `    replaced ${i}` : `    const value${i} = compute(${i}); // line ${i}`)),
    all_lines: file((i) => `    replaced ${i}`),
  };
  // The floor: what any line diff must do at least, in the same run — split both texts into lines and compare them
  // position by position once.
  const floorOf = (after: string): number => {
    const times: number[] = [];
    for (let k = 0; k < 15; k++) {
      const t = performance.now();
      const a = base.split("\n");
      const b = after.split("\n");
      let same = 0;
      for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] === b[i]) same++;
      if (same < 0) throw new Error("unreachable");
      times.push(performance.now() - t);
    }
    return median(times);
  };
  const figures: Figure[] = [];
  for (const [name, after] of Object.entries(cases)) {
    const times: number[] = [];
    for (let k = 0; k < 15; k++) {
      const t = performance.now();
      unifiedDiff(base, after, "big.ts");
      times.push(performance.now() - t);
    }
    const value = median(times);
    figures.push({ name: `chat.approval_diff.${name}_ms.median`, value, unit: "ms", target: "< 50", ok: value < 50, max: Math.max(...times), floor: floorOf(after), floor_what: "split both texts into lines, compare them position by position" });
  }
  return Promise.resolve(figures);
}
