/**
 * A streaming answer on the terminal: with a `MarkdownStream`, complete lines are rendered as markdown while the
 * unfinished line shows raw and is erased (cursor up over its wrapped rows, clear to the end of the screen) once it
 * completes; without one, text is written as it arrives.
 * Contract: `end()` renders what is left (the unfinished line, a pending table) at the end of a message;
 * `redrawn()` shows the unfinished line again after the screen was cleared and the transcript printed again.
 */
import { visibleWidth, type MarkdownStream } from "./markdown.js";

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

  private unshow(): void {
    if (this.shown === 0) return;
    const cols = process.stdout.columns > 0 ? process.stdout.columns : 80;
    const up = Math.floor((this.shown - 1) / cols);
    this.out.control(`\r${up > 0 ? `\x1b[${up}A` : ""}\x1b[J`);
    this.shown = 0;
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
      this.out.transient(this.partial);
      this.shown = visibleWidth(this.partial);
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
    this.out.transient(this.partial);
    this.shown = visibleWidth(this.partial);
  }
}
