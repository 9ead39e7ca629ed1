/**
 * A virtual terminal (xterm.js, headless) fed with what `berth chat` wrote to its pseudo-terminal, so tests can
 * assert what the screen shows: the rows in view and the whole buffer with its scrollback.
 * A resize is applied where the chat's redraw sequence starts (the chat answers SIGWINCH asynchronously; what it
 * wrote before its redraw was for the old size and is cleared by the redraw anyway).
 */
import xterm from "@xterm/headless";
import { REDRAW } from "../../src/cli/chat/screen.js";

export class VTerm {
  private readonly term: InstanceType<typeof xterm.Terminal>;
  private fed = 0;
  private chain: Promise<void> = Promise.resolve();
  private pending: { cols: number; rows: number } | null = null;

  constructor(cols: number, rows: number) {
    this.term = new xterm.Terminal({ cols, rows, scrollback: 10_000, allowProposedApi: true });
  }

  private write(data: string): Promise<void> {
    return new Promise((resolve) => this.term.write(data, resolve));
  }

  /** Feeds the part of `all` (everything the chat wrote so far) not fed yet. */
  feed(all: string): Promise<void> {
    let data = all.slice(this.fed);
    if (this.pending !== null) {
      const at = data.indexOf(REDRAW);
      if (at >= 0) {
        const size = this.pending;
        this.pending = null;
        const before = data.slice(0, at);
        const rest = data.slice(at);
        this.fed = all.length;
        this.chain = this.chain.then(async () => {
          await this.write(before);
          this.term.resize(size.cols, size.rows);
          await this.write(rest);
        });
        return this.chain;
      }
      // Hold back a tail that may be the start of the redraw sequence.
      for (let k = Math.min(REDRAW.length - 1, data.length); k > 0; k--)
        if (REDRAW.startsWith(data.slice(-k))) {
          data = data.slice(0, -k);
          break;
        }
    }
    this.fed += data.length;
    this.chain = this.chain.then(() => this.write(data));
    return this.chain;
  }

  /** The next redraw happens at this size. */
  resizeAtRedraw(cols: number, rows: number): void {
    this.pending = { cols, rows };
  }

  /** The rows in view, trailing spaces trimmed. */
  async screen(all: string): Promise<string[]> {
    await this.feed(all);
    const b = this.term.buffer.active;
    return Array.from({ length: this.term.rows }, (_, i) => b.getLine(b.viewportY + i)?.translateToString(true) ?? "");
  }

  /** Every line of the buffer, scrollback first (wrapped rows joined into one line). */
  async lines(all: string): Promise<string[]> {
    await this.feed(all);
    const b = this.term.buffer.active;
    const out: string[] = [];
    for (let i = 0; i < b.length; i++) {
      const l = b.getLine(i)!;
      const t = l.translateToString(true);
      if (l.isWrapped && out.length > 0) out[out.length - 1] += t;
      else out.push(t);
    }
    while (out.length > 0 && out.at(-1) === "") out.pop();
    return out;
  }

  /** For each line of the buffer (scrollback first, not joined), the cell columns where `ch` is shown. */
  async columnsOf(all: string, ch: string): Promise<number[][]> {
    await this.feed(all);
    const b = this.term.buffer.active;
    const out: number[][] = [];
    for (let i = 0; i < b.length; i++) {
      const l = b.getLine(i)!;
      const cols: number[] = [];
      for (let x = 0; x < this.term.cols; x++) if (l.getCell(x)?.getChars() === ch) cols.push(x);
      out.push(cols);
    }
    return out;
  }

  get size(): { cols: number; rows: number } {
    return { cols: this.term.cols, rows: this.term.rows };
  }
}
