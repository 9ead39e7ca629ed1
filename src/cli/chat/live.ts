/**
 * A streaming answer on the terminal: with a `MarkdownStream`, complete lines are rendered as markdown while the
 * unfinished line shows raw and is erased (cursor up over its rows, clear to the end of the screen) once it
 * completes; without one, text is written as it arrives.
 * The unfinished line is broken into rows here (tabs expanded), each narrower than the terminal by `cellWidth`'s
 * count, which is never below a terminal's: the terminal never wraps them itself, so the rows to erase are exactly the
 * rows written, whatever its width table says about wide characters, emoji, combining marks or tabs.
 * Rows are broken greedily, so a row never changes once the next one has started: each delta is appended where the
 * last one ended (its own characters and row breaks only), never the whole line again. At most `size().rows` rows
 * (the scroll region's height) are shown: past that, a new row deletes the shown line's top row (`CSI M`, delete
 * line: it leaves the screen without entering the scrollback), so every shown row stays within reach of the erase
 * and no raw row is left in the scrollback above the rendered line. Bytes and work per delta are bounded by the
 * delta, whatever the line's length.
 * The text is the model's, streamed raw: here a CRLF, and a lone CR, end a line (a CR split from its LF between
 * deltas is held until the next one shows which it is), and every other terminal control is shown (`terminalSafe`),
 * so no delta can move the cursor back over what the answer showed.
 * Contract: `end()` renders what is left (the unfinished line, a pending table) at the end of a message;
 * `redrawn()` shows the unfinished line's last rows again after the screen was cleared and the transcript printed
 * again (at a new size, or after Ctrl-Z and `fg`).
 */
import { cellWidth, type MarkdownStream } from "./markdown.js";
import { terminalSafe } from "../terminal-safe.js";

/** Greedy rows of at most `width` columns (by `cellWidth`), tabs expanded to the next multiple of 8 of their row. */
export class RowBreaker {
  /** Columns used in the current row. */
  col = 0;

  constructor(readonly width: number) {}

  /** `text` laid out after what came before: the first piece continues the current row, each other one starts a row. */
  add(text: string): string[] {
    const pieces = [""];
    let piece = "";
    for (const ch of text) {
      let cells = ch === "\t" ? 8 - (this.col % 8) : cellWidth(ch);
      if (this.col + cells > this.width && this.col > 0) {
        pieces[pieces.length - 1] = piece;
        pieces.push("");
        piece = "";
        this.col = 0;
        if (ch === "\t") cells = 8;
      }
      piece += ch === "\t" ? " ".repeat(Math.min(cells, this.width)) : ch;
      this.col += cells;
    }
    pieces[pieces.length - 1] = piece;
    return pieces;
  }
}

/** `text` as rows of at most `width` columns (see `RowBreaker`). */
export function rowsOf(text: string, width: number): string[] {
  return new RowBreaker(width).add(text);
}

export interface LiveOutput {
  /** Writes transcript text through the chat's writer (which tracks line starts and clears the spinner). */
  write(text: string): void;
  /** Writes text that is erased again (the unfinished line): not part of the transcript. */
  transient(text: string): void;
  /** Writes terminal control output; the cursor is at a line start afterwards. */
  control(text: string): void;
  /** The terminal's width, and the rows the unfinished line may take (the scroll region's height). */
  size(): { cols: number; rows: number };
}

/** What a delta may end in that the next delta completes: half of a character, or a CR that may be a CRLF's. */
const HELD_END = /[\ud800-\udbff\r]$/;

export class LiveAnswer {
  /** The unfinished line, in the pieces it arrived in (joined when it completes: no copy per delta). */
  private partial: string[] = [];
  /**
   * A high surrogate that ended a delta, held until its low half arrives (a row never shows half a character); or a
   * CR, held until the next delta says whether an LF follows it.
   */
  private held = "";
  /** Rows of the unfinished line on screen (0: none), at most `limit`; `rows` lays out what follows them. */
  private shown = 0;
  private limit = 1;
  private rows = new RowBreaker(1);
  /** Characters streamed so far (the working indicator's token estimate). */
  chars = 0;

  constructor(
    private readonly md: MarkdownStream | null,
    private readonly out: LiveOutput,
  ) {}

  /** Erases the rows of the unfinished line on screen. */
  private unshow(): void {
    if (this.shown === 0) return;
    const up = this.shown - 1;
    this.out.control(`\r${up > 0 ? `\x1b[${up}A` : ""}\x1b[J`);
    this.shown = 0;
  }

  /** A new unfinished line at the current size. */
  private begin(): void {
    const { cols, rows } = this.out.size();
    // One column short of the width: a full row would leave the cursor waiting to wrap.
    this.rows = new RowBreaker(Math.max(1, cols - 1));
    this.limit = Math.max(1, rows);
  }

  /** Shows `pieces` (from `RowBreaker.add`): the first continues the shown row, each other one starts a row. */
  private append(pieces: string[]): void {
    let s = "";
    pieces.forEach((p, i) => {
      if (i > 0 || this.shown === 0) {
        if (this.shown === 0) this.shown = 1;
        else if (this.shown < this.limit) {
          s += "\r\n";
          this.shown++;
        } else {
          // The screen is full of this line: its top row goes (delete line), the rows below move up one.
          const up = this.limit - 1;
          s += up > 0 ? `\r\x1b[${up}A\x1b[M\x1b[${up}B` : "\r\x1b[2K";
        }
      }
      s += p;
    });
    this.out.transient(s);
  }

  stream(text: string): void {
    this.chars += text.length;
    text = this.held + text;
    this.held = "";
    if (HELD_END.test(text)) {
      this.held = text.slice(-1);
      text = text.slice(0, -1);
    }
    if (text === "") return;
    text = terminalSafe(text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);
    if (this.md === null) return this.out.write(text);
    const nl = text.lastIndexOf("\n");
    if (nl >= 0) {
      this.unshow();
      const lines = text.slice(0, nl).split("\n");
      lines[0] = this.partial.join("") + lines[0]!;
      this.partial = [];
      for (const l of lines) for (const r of this.md.push(l)) this.out.write(r + "\n");
      text = text.slice(nl + 1);
      if (text === "") return;
    }
    if (this.partial.length === 0) this.begin();
    this.partial.push(text);
    this.append(this.rows.add(text));
  }

  end(): void {
    if (this.md === null) {
      if (this.held !== "") this.out.write(terminalSafe(this.held));
      this.held = "";
      return;
    }
    this.unshow();
    // A held CR ends the line (`push` takes a trailing CR as its line ending).
    const line = this.partial.join("") + this.held;
    this.partial = [];
    this.held = "";
    const rest = line !== "" ? this.md.push(line) : [];
    for (const r of [...rest, ...this.md.flush()]) this.out.write(r + "\n");
  }

  redrawn(): void {
    this.shown = 0;
    if (this.md === null || this.partial.length === 0) return;
    // Laid out again at the current size; only the rows that fit are shown.
    const line = this.partial.join("");
    this.partial = [line];
    this.begin();
    const rows = this.rows.add(line);
    this.append(rows.length > this.limit ? rows.slice(-this.limit) : rows);
  }
}
