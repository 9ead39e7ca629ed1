/**
 * A small line-based unified diff for approval cards (Myers' O((n+m)·d) shortest edit script over lines). Pure.
 * Contract: `unifiedDiff(a, b, label)` returns `--- a/label`, `+++ b/label` and `@@` hunks with 3 context lines;
 * within a change, removed lines come before added ones. It returns null (the caller shows a summary instead) for
 * inputs past `MAX_DIFF_LINES` lines on either side, and for changes needing more than `MAX_DIFF_EDITS` removed plus
 * added lines: the search grows with the square of the edits, and a card shows only its first 80 lines anyway.
 * Why not LCS: a full table over 2,000 × 2,000 lines took 50–90 ms (and 16 MB) on the chat's thread.
 */
export const MAX_DIFF_LINES = 2000;
/** The most removed + added lines a diff is searched for (`bench/diff.bench.ts`: the worst case stays a few ms). */
export const MAX_DIFF_EDITS = 1000;

type Op = { k: " " | "-" | "+"; line: string };

function lines(s: string): string[] {
  if (s === "") return [];
  const l = s.split("\n");
  if (l.at(-1) === "") l.pop();
  return l;
}

/**
 * The shortest edit script from `a` to `b` as operations (null past `maxEdits`). Forward greedy Myers keeping each
 * step's furthest-reaching points (diagonals -d..d) for the walk back; lines compared as interned numbers.
 */
function editScript(a: string[], b: string[], maxEdits: number): Op[] | null {
  const ids = new Map<string, number>();
  const id = (s: string): number => {
    let v = ids.get(s);
    if (v === undefined) ids.set(s, (v = ids.size));
    return v;
  };
  const n = a.length;
  const m = b.length;
  const x1 = Int32Array.from(a, id);
  const y1 = Int32Array.from(b, id);
  const limit = Math.min(n + m, maxEdits);
  const off = limit + 1;
  const v = new Int32Array(2 * limit + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= limit && found < 0; d++) {
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[off + k - 1]! < v[off + k + 1]!) ? v[off + k + 1]! : v[off + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && x1[x] === y1[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) found = d;
    }
    trace.push(v.slice(off - d, off + d + 1));
  }
  if (found < 0) return null;
  // Walk back from (n, m): each step is one removal or addition, preceded by a run of equal lines.
  const rev: Op[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const prev = trace[d - 1]!;
    const at = (k: number): number => prev[k + d - 1]!;
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const pk = down ? k + 1 : k - 1;
    const px = at(pk);
    const py = px - pk;
    const sx = down ? px : px + 1;
    while (x > sx) {
      rev.push({ k: " ", line: a[--x]! });
      y--;
    }
    if (down) rev.push({ k: "+", line: b[--y]! });
    else rev.push({ k: "-", line: a[--x]! });
    x = px;
    y = py;
  }
  while (x > 0) rev.push({ k: " ", line: a[--x]! });
  return rev.reverse();
}

function ops(a: string[], b: string[], maxEdits: number): Op[] | null {
  // The common head and tail are kept out of the search.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const mid = editScript(a.slice(head, a.length - tail), b.slice(head, b.length - tail), maxEdits);
  if (mid === null) return null;
  const out: Op[] = a.slice(0, head).map((line) => ({ k: " ", line }));
  for (const o of mid) out.push(o);
  for (const line of a.slice(a.length - tail)) out.push({ k: " ", line });
  return out;
}

/** Why `unifiedDiff` gave up on these texts: `too long` (past `MAX_DIFF_LINES`) or `too many changes`. */
export function whyNoDiff(before: string, after: string): string {
  return lines(before).length > MAX_DIFF_LINES || lines(after).length > MAX_DIFF_LINES ? "too long to diff" : "too many changes to diff";
}

export function unifiedDiff(before: string, after: string, label: string, context = 3, maxEdits = MAX_DIFF_EDITS): string | null {
  const a = lines(before);
  const b = lines(after);
  if (a.length > MAX_DIFF_LINES || b.length > MAX_DIFF_LINES) return null;
  const all = ops(a, b, maxEdits);
  if (all === null) return null;
  const out = [`--- ${before === "" ? "/dev/null" : `a/${label}`}`, `+++ b/${label}`];
  let idx = 0;
  let aStart = 1;
  let bStart = 1;
  let counted = 0;
  while (idx < all.length) {
    while (idx < all.length && all[idx]!.k === " ") idx++;
    if (idx >= all.length) break;
    const start = Math.max(0, idx - context);
    let end = idx;
    // Extend the hunk while changes are within 2×context lines of each other.
    for (let k = idx; k < all.length; k++) {
      if (all[k]!.k !== " ") end = k;
      else if (k - end > 2 * context) break;
    }
    const stop = Math.min(all.length, end + context + 1);
    for (; counted < start; counted++) {
      if (all[counted]!.k !== "+") aStart++;
      if (all[counted]!.k !== "-") bStart++;
    }
    const hunk = all.slice(start, stop);
    const aLen = hunk.filter((o) => o.k !== "+").length;
    const bLen = hunk.filter((o) => o.k !== "-").length;
    out.push(`@@ -${aLen === 0 ? aStart - 1 : aStart},${aLen} +${bLen === 0 ? bStart - 1 : bStart},${bLen} @@`);
    for (const o of hunk) out.push(o.k + o.line);
    idx = stop;
  }
  return out.join("\n") + "\n";
}
