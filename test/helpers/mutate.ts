/**
 * JSON mutation for the seeded fuzzers: values swapped for odd ones, keys dropped or renamed, deep nesting and
 * text-level edits of the serialization. Every choice comes from the given PRNG, so a seed reproduces a run.
 */
export type Rand = () => number;
export const pick = <T>(r: Rand, a: readonly T[]): T => a[Math.floor(r() * a.length)]!;
export const ODD: readonly unknown[] = [null, 0, -1, 1.5, 1e308, "", "x", "é😀", true, false, [], {}, [1, [2]], { type: "x" }, "__proto__", "constructor", "x".repeat(5000)];
const PIECES = ["{", "}", "[", "]", '"', ":", ",", "\\", "\\u00", "é", "😀", "\u2028", "null", "-0", "1e999"];

export interface MutatorOptions {
  /** Keys sometimes added to an object with an odd value. */
  extraKeys: readonly string[];
  /** How often the serialization gets text-level edits (0–1). */
  textEditRate: number;
  /** A key whose value is kept as it is when this returns true (called for every key; may draw from the PRNG). */
  keep?: (key: string, r: Rand) => boolean;
}

export function mutator(o: MutatorOptions): { mutateValue: (r: Rand, v: unknown) => unknown; mutateText: (r: Rand, v: unknown) => string } {
  const mutateValue = (r: Rand, v: unknown): unknown => {
    const x = r();
    if (x < 0.06) return pick(r, ODD);
    if (x < 0.07) {
      const d = 20 + Math.floor(r() * 60);
      return JSON.parse("[".repeat(d) + "]".repeat(d));
    }
    if (Array.isArray(v)) return v.map((e) => mutateValue(r, e));
    if (v && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, e] of Object.entries(v)) {
        if (r() < 0.05) continue; // drop
        out[r() < 0.02 ? pick(r, ["__proto__", "constructor", "", "type"]) : k] = o.keep?.(k, r) === true ? e : mutateValue(r, e);
      }
      if (r() < 0.05) out[pick(r, o.extraKeys)] = pick(r, ODD);
      return out;
    }
    return v;
  };
  const mutateText = (r: Rand, v: unknown): string => {
    let s = JSON.stringify(mutateValue(r, v)) ?? "null";
    if (r() < 0.05) {
      const d = 30 + Math.floor(r() * 5000);
      s = s.replace(/}$/, `,"deep":${"[".repeat(d)}${"]".repeat(d)}}`);
    }
    if (r() < o.textEditRate) {
      const chars = [...s];
      for (let k = 0; k < 1 + Math.floor(r() * 3); k++) {
        const at = Math.floor(r() * (chars.length + 1));
        if (r() < 0.5) chars.splice(at, 1);
        else chars.splice(at, 0, pick(r, PIECES));
      }
      s = chars.join("");
    }
    return s.replace(/\n/g, "");
  };
  return { mutateValue, mutateText };
}
