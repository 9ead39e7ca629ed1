/**
 * A streaming answer on the terminal: with a `MarkdownStream`, complete lines are rendered as markdown while the
 * unfinished line shows raw and is erased (cursor up over its rows, clear to the end of the screen) once it
 * completes; without one, text is written as it arrives.
 * The unfinished line is broken into rows here (tabs expanded), each narrower than the terminal by `cellWidth`'s
 * count, which is never below a terminal's: the terminal never wraps them itself, so the rows to erase are exactly the
 * rows written, whatever its width table says about wide characters, emoji, combining marks or tabs.
 * Contract: `end()` renders what is left (the unfinished line, a pending table) at the end of a message;
 * `redrawn()` shows the unfinished line again after the screen was cleared and the transcript printed again.
 */
import { cellWidth, type MarkdownStream } from "./markdown.js";

/** `text` as rows of at most `width` columns (by `cellWidth`), tabs expanded to the next multiple of 8. */
export function rowsOf(text: string, width: number): string[] {
  const rows: string[] = [];
  let row = "";
  let col = 0;
  for (const ch of text) {
    const cells = ch === "\t" ? 8 - (col % 8) : cellWidth(ch);
    if (col + cells > width && col > 0) {
      rows.push(row);
      row = "";
      col = 0;
    }
    row += ch === "\t" ? " ".repeat(Math.min(cells, width)) : ch;
    col += cells;
  }
  rows.push(row);
  return rows;
}

export interface LiveOutput {
  /** Writes transcript text through the chat's writer (which tracks line starts and clears the spinner). */
  write(text: string): void;
  /** Writes text that is erased again (the unfinished line): not part of the transcript. */
  transient(text: string): void;
  /** Writes terminal control output; the cursor is at a line start afterwards. */
  control(text: string): void;
}

export class LiveAnswer {
  private partial = "";
  private shown = 0;
  /** Characters streamed so far (the working indicator's token estimate). */
  chars = 0;

  constructor(
    private readonly md: MarkdownStream | null,
    private readonly out: LiveOutput,
  ) {}

  /** Rows of the unfinished line on screen. */
  private unshow(): void {
    if (this.shown === 0) return;
    const up = this.shown - 1;
    this.out.control(`\r${up > 0 ? `\x1b[${up}A` : ""}\x1b[J`);
    this.shown = 0;
  }

  private show(): void {
    const cols = process.stdout.columns > 0 ? process.stdout.columns : 80;
    // One column short of the width: a full row would leave the cursor waiting to wrap.
    const rows = rowsOf(this.partial, Math.max(1, cols - 1));
    this.out.transient(rows.join("\r\n"));
    this.shown = rows.length;
  }

  stream(text: string): void {
    this.chars += text.length;
    if (this.md === null) return this.out.write(text);
    const lines = (this.partial + text).split("\n");
    this.partial = lines.pop()!;
    if (lines.length > 0) this.unshow();
    for (const l of lines) for (const r of this.md.push(l)) this.out.write(r + "\n");
    if (this.partial !== "") {
      this.unshow();
      this.show();
    }
  }

  end(): void {
    if (this.md === null) return;
    this.unshow();
    const rest = this.partial !== "" ? this.md.push(this.partial) : [];
    this.partial = "";
    for (const r of [...rest, ...this.md.flush()]) this.out.write(r + "\n");
  }

  redrawn(): void {
    this.shown = 0;
    if (this.md === null || this.partial === "") return;
    this.show();
  }
}
