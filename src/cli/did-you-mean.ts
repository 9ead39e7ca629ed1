/**
 * The nearest known word to a mistyped one (a command, a flag), for "did you mean" hints.
 * Contract: case-insensitive; a transposition counts as one edit; a candidate is offered only within two edits and
 * fewer edits than its length minus two (so `-x` never suggests `-p`); inputs past 40 characters get no suggestion
 * (a pasted prompt or key is not compared, nor quoted back).
 */

/** Edit distance with adjacent transpositions (optimal string alignment). */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  return d[a.length]![b.length]!;
}

/** The known word closest to `typed`, or null when none is close enough. `weight`: the part of a word that counts for its length (a flag's name without its dashes). */
export function nearest(typed: string, known: readonly string[], weight: (word: string) => number = (w) => w.length): string | null {
  const t = typed.toLowerCase();
  if (t.length > 40) return null;
  let best: { word: string; n: number } | null = null;
  for (const word of known) {
    const n = distance(t, word.toLowerCase());
    if (best === null || n < best.n) best = { word, n };
  }
  return best !== null && best.n <= Math.min(2, weight(best.word) - 2) ? best.word : null;
}
