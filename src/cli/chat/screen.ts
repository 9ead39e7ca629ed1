/**
 * The interactive chat's terminal: everything the chat and its readline write to stdout passes through here.
 * Contract:
 * - `write`/`line`/`status` text is the transcript: it is also kept (the newest `MAX_TRANSCRIPT_CHARS`), and a
 *   terminal resize clears the screen and its scrollback and prints the kept transcript again at the new width,
 *   then calls `onRedrawn` (which shows the unfinished answer line or the prompt again). `transient` text (the
 *   unfinished answer line) and `control` sequences are not kept; `record` keeps text that is already on screen
 *   (what readline echoed).
 * - On a terminal that can redraw, with at least `MIN_FOOTER_ROWS` rows, the last row is a footer outside the scroll
 *   region: the transcript and the prompt scroll above it. Anything that erases to the end of the screen (readline
 *   refreshing its line, the unfinished answer line being replaced) is followed by the footer drawn again.
 * - `rlOutput` is readline's output: while `muted` (a turn streams) its echo is dropped, so type-ahead never lands
 *   inside the answer; keystrokes are still read.
 * - A working indicator (`spinner`) is drawn on the last transcript line and erased before any other output.
 */
import { Writable } from "node:stream";
import { cellWidth, visibleWidth } from "./markdown.js";

/** The transcript kept for a redraw: the newest this many characters, in whole lines. */
export const MAX_TRANSCRIPT_CHARS = 1024 * 1024;
export const MIN_FOOTER_ROWS = 6;
/** Erase to the end of the screen (readline's clearScreenDown, the live answer's erase). */
const ERASE_DOWN = /\x1b\[0?J/;
export const TRIMMED_NOTE = "(earlier output is not shown again after a resize)\n";
/** What a resize writes first: reset the scroll region, home, clear the screen and the scrollback. */
export const REDRAW = "\x1b[r\x1b[H\x1b[2J\x1b[3J";

type Out = NodeJS.WriteStream;

export class Spinner {
  private timer: NodeJS.Timeout | null = null;
  private shown = false;

  constructor(
    private readonly out: (text: string) => void,
    private readonly cols: () => number = () => 80,
  ) {}

  /** Redraws every 100 ms with `text(frame)`, or skips a tick when it returns null. */
  start(text: (frame: string) => string | null): void {
    const frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏";
    let f = 0;
    this.timer = setInterval(() => {
      const t = text(frames[f % frames.length]!);
      if (t === null) return;
      f++;
      // Cut to the width: a wrapped indicator would leave its first row behind when it is erased.
      this.out(`\r\x1b[2K${fit(t, this.cols() - 1)}`);
      this.shown = true;
    }, 100);
  }

  /** Erases the spinner's line if it is shown (`erase: false`: the screen was cleared, just forget it). */
  clear(erase = true): void {
    if (this.shown) {
      this.shown = false;
      if (erase) this.out("\r\x1b[2K");
    }
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.clear();
  }
}

export class Screen {
  atLineStart = true;
  /** readline's prompt is shown on the current line. */
  promptShown = false;
  muted = false;
  readonly spinner: Spinner;
  readonly rlOutput: Writable;
  /** Called after a resize redrew the transcript: first `live` (a turn's unfinished answer line), then `onRedrawn`. */
  onRedrawn: ((hadPrompt: boolean) => void) | null = null;
  live: (() => void) | null = null;
  private readonly kept: string[] = [];
  private keptChars = 0;
  private trimmed = false;
  /** The footer for a width (in columns). */
  private footer: (cols: number) => string = () => "";
  private footerOn = false;
  private resizeTimer: NodeJS.Timeout | null = null;
  private readonly onResize = (): void => {
    if (this.resizeTimer !== null) clearTimeout(this.resizeTimer);
    // A window being dragged sends a burst of resizes: redraw once it settles.
    this.resizeTimer = setTimeout(() => {
      this.resizeTimer = null;
      this.redraw();
    }, 50);
  };

  constructor(
    private readonly out: Out,
    /** A terminal that understands cursor movement (not a pipe, not TERM=dumb). */
    readonly redraws: boolean,
  ) {
    this.spinner = new Spinner(
      (t) => this.raw(t),
      () => (this.out.columns > 0 ? this.out.columns : 80),
    );
    const rl = new Writable({
      write: (chunk: Buffer | string, _enc, cb) => {
        if (!this.muted) this.raw(String(chunk));
        cb();
      },
    });
    Object.defineProperties(rl, {
      columns: { get: () => this.out.columns },
      rows: { get: () => this.out.rows },
      isTTY: { value: true },
    });
    this.rlOutput = rl;
    if (redraws) out.on("resize", this.onResize);
  }

  /** Writes to the terminal, drawing the footer again after an erase-down. */
  private raw(text: string): void {
    this.out.write(text);
    if (this.footerOn && ERASE_DOWN.test(text)) this.drawFooter();
  }

  private keep(text: string): void {
    // Only a terminal that redraws ever prints it again. Small pieces are joined so trimming stays cheap.
    if (!this.redraws) return;
    const last = this.kept.length - 1;
    if (last >= 0 && this.kept[last]!.length < 4096) this.kept[last] += text;
    else this.kept.push(text);
    this.keptChars += text.length;
    // Over the bound: drop whole lines from the front (a cut never splits a line or its styling).
    while (this.keptChars > MAX_TRANSCRIPT_CHARS && this.kept.length > 0) {
      this.trimmed = true;
      const first = this.kept[0]!;
      const nl = first.indexOf("\n", Math.min(first.length, this.keptChars - MAX_TRANSCRIPT_CHARS) - 1);
      if (nl < 0 || nl === first.length - 1) {
        this.kept.shift();
        this.keptChars -= first.length;
      } else {
        this.kept[0] = first.slice(nl + 1);
        this.keptChars -= nl + 1;
      }
    }
  }

  /** Transcript text. */
  write(text: string): void {
    if (text.length === 0) return;
    this.spinner.clear();
    if (this.promptShown) {
      this.promptShown = false;
      this.raw(this.redraws ? "\r\x1b[2K" : "\n");
    }
    this.raw(text);
    this.keep(text);
    this.atLineStart = text.endsWith("\n");
  }

  line(text: string): void {
    if (!this.atLineStart) this.write("\n");
    this.write(text + "\n");
  }

  /** Text shown but not kept (the unfinished answer line). */
  transient(text: string): void {
    if (text.length === 0) return;
    this.spinner.clear();
    this.raw(text);
    this.atLineStart = false;
  }

  /** Terminal control output; the cursor is at a line start afterwards. */
  control(text: string): void {
    this.raw(text);
    this.atLineStart = true;
  }

  /** Keeps text that is already on screen (a line readline echoed). */
  record(text: string): void {
    this.keep(text);
    this.atLineStart = text.endsWith("\n");
  }

  private get rows(): number {
    return this.out.rows > 0 ? this.out.rows : 0;
  }

  /** The width, and the rows text can scroll in (above the footer); 80×24 when the terminal does not say. */
  size(): { cols: number; rows: number } {
    const cols = this.out.columns > 0 ? this.out.columns : 80;
    return { cols, rows: (this.rows > 0 ? this.rows : 24) - (this.footerOn ? 1 : 0) };
  }

  /** Pins a footer to the last row (when the terminal is tall enough). */
  startFooter(text: (cols: number) => string): void {
    this.footer = text;
    if (!this.redraws || this.rows < MIN_FOOTER_ROWS) return;
    this.footerOn = true;
    // Make room: a cursor on the last row moves up one (the screen scrolls), then the region excludes that row.
    this.out.write(`\n\x1b[A\x1b7\x1b[1;${this.rows - 1}r\x1b8`);
    this.drawFooter();
  }

  setFooter(text: (cols: number) => string): void {
    this.footer = text;
    this.drawFooter();
  }

  private drawFooter(): void {
    if (!this.footerOn) return;
    const cols = this.out.columns > 0 ? this.out.columns : 80;
    this.out.write(`\x1b7\x1b[${this.rows};1H\x1b[2K${fit(this.footer(cols - 1), cols - 1)}\x1b8`);
  }

  /** Clears the screen and prints the transcript again at the current size. */
  redraw(): void {
    if (!this.redraws) return;
    this.spinner.clear(false);
    this.footerOn = this.rows >= MIN_FOOTER_ROWS;
    this.out.write(REDRAW + (this.footerOn ? `\x1b[1;${this.rows - 1}r` : ""));
    if (this.trimmed) this.out.write(TRIMMED_NOTE);
    const text = this.kept.join("");
    this.out.write(text);
    this.atLineStart = text === "" || text.endsWith("\n");
    const hadPrompt = this.promptShown;
    this.promptShown = false;
    this.drawFooter();
    this.live?.();
    this.onRedrawn?.(hadPrompt);
  }

  /** The footer was pinned when the chat was suspended (Ctrl-Z): `resume` pins it again. */
  private suspendedFooter = false;

  /** Gives the terminal to the shell for a while (Ctrl-Z): no scroll region, no footer, no spinner line. */
  suspend(): void {
    this.spinner.clear();
    this.suspendedFooter = this.footerOn;
    if (!this.footerOn) return;
    this.footerOn = false;
    this.out.write(`\x1b7\x1b[${this.rows};1H\x1b[2K\x1b[r\x1b8`);
  }

  /** Takes the terminal back after `suspend` (`fg`): the cursor is at a line start below what the shell printed. */
  resume(): void {
    this.atLineStart = true;
    this.promptShown = false;
    if (this.suspendedFooter) this.startFooter(this.footer);
    this.suspendedFooter = false;
  }

  /** Gives the terminal back: no scroll region, no footer. */
  stop(): void {
    if (this.resizeTimer !== null) clearTimeout(this.resizeTimer);
    this.out.off("resize", this.onResize);
    this.spinner.stop();
    if (!this.footerOn) return;
    this.footerOn = false;
    this.out.write(`\x1b7\x1b[${this.rows};1H\x1b[2K\x1b[r\x1b8`);
  }
}

/** `text` cut to `width` visible characters (styles kept, reset at the cut). */
export function fit(text: string, width: number): string {
  if (visibleWidth(text) <= width) return text;
  let out = "";
  let w = 0;
  for (const part of text.split(/(\x1b\[[0-9;]*m)/)) {
    if (part.startsWith("\x1b[")) {
      out += part;
      continue;
    }
    for (const ch of part) {
      if (w + cellWidth(ch) > width - 1) return out + "…\x1b[0m";
      out += ch;
      w += cellWidth(ch);
    }
  }
  return out;
}
