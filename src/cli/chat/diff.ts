/**
 * A small line-based unified diff (LCS over lines) for approval cards. Pure.
 * Contract: `unifiedDiff(a, b, label)` returns `--- a/label`, `+++ b/label` and `@@` hunks with 3 context lines;
 * inputs past `MAX_DIFF_LINES` lines on either side are not diffed (null: the caller shows a summary instead).
 */
export const MAX_DIFF_LINES = 2000;

type Op = { k: " " | "-" | "+"; line: string };

function lines(s: string): string[] {
  if (s === "") return [];
  const l = s.split("\n");
  if (l.at(-1) === "") l.pop();
  return l;
}

function ops(a: string[], b: string[]): Op[] {
  // Trim the common head and tail, then LCS the middle.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  const n = am.length;
  const m = bm.length;
  const t = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      t[i * (m + 1) + j] = am[i] === bm[j] ? t[(i + 1) * (m + 1) + j + 1]! + 1 : Math.max(t[(i + 1) * (m + 1) + j]!, t[i * (m + 1) + j + 1]!);
  const out: Op[] = a.slice(0, head).map((line) => ({ k: " ", line }));
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (am[i] === bm[j]) {
      out.push({ k: " ", line: am[i]! });
      i++;
      j++;
    } else if (t[(i + 1) * (m + 1) + j]! >= t[i * (m + 1) + j + 1]!) out.push({ k: "-", line: am[i++]! });
    else out.push({ k: "+", line: bm[j++]! });
  }
  while (i < n) out.push({ k: "-", line: am[i++]! });
  while (j < m) out.push({ k: "+", line: bm[j++]! });
  for (const line of a.slice(a.length - tail)) out.push({ k: " ", line });
  return out;
}

export function unifiedDiff(before: string, after: string, label: string, context = 3): string | null {
  const a = lines(before);
  const b = lines(after);
  if (a.length > MAX_DIFF_LINES || b.length > MAX_DIFF_LINES) return null;
  const all = ops(a, b);
  const out = [`--- ${before === "" ? "/dev/null" : `a/${label}`}`, `+++ b/${label}`];
  let idx = 0;
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
    let aStart = 1;
    let bStart = 1;
    for (let k = 0; k < start; k++) {
      if (all[k]!.k !== "+") aStart++;
      if (all[k]!.k !== "-") bStart++;
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
