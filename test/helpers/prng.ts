/** Deterministic xorshift32 PRNG in [0, 1) for property and fuzz tests (a failing seed reproduces). */
export function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

/** `count` strings of 0 to `maxLen` characters drawn from `alphabet`, the same for the same `seed`. */
export function randomStrings(count: number, maxLen: number, alphabet: string, seed: number): string[] {
  const r = prng(seed);
  const pick = (n: number): number => Math.floor(r() * n);
  return Array.from({ length: count }, () => Array.from({ length: pick(maxLen + 1) }, () => alphabet[pick(alphabet.length)]!).join(""));
}
