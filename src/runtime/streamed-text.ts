/**
 * Streamed text kept without a rope: deltas are held in a short list that is joined into one flat block every
 * `BLOCK` deltas, so a 20,000-delta answer is held as about a hundred strings instead of 20,000 cons cells and
 * 20,000 small strings that each survive the young-generation collections of the turn (and are copied by them).
 *
 * Contract: `text()` is the concatenation of every `add`ed string, in order; `length` its UTF-16 length. Joining
 * costs one copy of each delta per block plus one at `text()` (which keeps the result, so repeated calls are free).
 */
const BLOCK = 256;

export class StreamedText {
  private blocks: string[] = [];
  private recent: string[] = [];
  private size = 0;

  add(s: string): void {
    if (s.length === 0) return;
    this.size += s.length;
    this.recent.push(s);
    if (this.recent.length >= BLOCK) {
      this.blocks.push(this.recent.join(""));
      this.recent = [];
    }
  }

  get length(): number {
    return this.size;
  }

  text(): string {
    if (this.recent.length > 0) {
      this.blocks.push(this.recent.length === 1 ? (this.recent[0] as string) : this.recent.join(""));
      this.recent = [];
    }
    if (this.blocks.length > 1) this.blocks = [this.blocks.join("")];
    return this.blocks[0] ?? "";
  }

  /** Empties it (returns the text it held). */
  take(): string {
    const t = this.text();
    this.blocks = [];
    this.size = 0;
    return t;
  }
}
