/**
 * The interactive chat's keyboard input: stdin, with the different ways terminals send Shift-Enter folded into one,
 * handed to readline as its input stream.
 * Contract: Shift-Enter arrives at readline as Meta-Enter (`ESC CR`), which readline itself ignores and the chat
 * reads as "newline in the prompt". The forms folded: kitty/CSI-u `ESC [13;2u`, xterm modifyOtherKeys
 * `ESC [27;2;13~`, `ESC CR` / `ESC LF` (what terminals set up for Shift-Enter send, e.g. VS Code's), and the keypad
 * Enter `ESC O M`. Every other byte passes unchanged, in order; raw mode, pause and end are forwarded.
 */
import { PassThrough } from "node:stream";

/** The Shift-Enter forms, longest first. */
const SHIFT_ENTER = /\x1b\[13;2u|\x1b\[27;2;13~|\x1bOM|\x1b\n/g;

/** `data` with every Shift-Enter form as `ESC CR`. */
export function foldShiftEnter(data: string): string {
  return data.replace(SHIFT_ENTER, "\x1b\r");
}

/** True for the keypress readline reports for `ESC CR` (the folded Shift-Enter). */
export function isShiftEnter(key: { name?: string; meta?: boolean } | undefined): boolean {
  return key?.name === "return" && key.meta === true;
}

export interface KeyInput {
  /** readline's input (a TTY-like stream). */
  readonly input: NodeJS.ReadableStream & { isTTY: boolean; setRawMode(mode: boolean): unknown };
  /** Stops reading stdin (the process can then exit). */
  close(): void;
}

export function keyInput(stdin: NodeJS.ReadStream): KeyInput {
  const input = Object.assign(new PassThrough({ encoding: "utf8" }), {
    isTTY: true,
    setRawMode(mode: boolean): unknown {
      if (stdin.isTTY) stdin.setRawMode(mode);
      return input;
    },
  });
  stdin.setEncoding("utf8");
  const onData = (d: string): void => void input.write(foldShiftEnter(d));
  const onEnd = (): void => void input.end();
  stdin.on("data", onData);
  stdin.on("end", onEnd);
  return {
    input,
    close(): void {
      stdin.off("data", onData);
      stdin.off("end", onEnd);
      stdin.pause();
      input.end();
    },
  };
}

export const PROMPT = "› ";
export const MORE = "… ";

/**
 * Joins the lines of a multi-line prompt: lines inside a bracketed paste, a line ended with Shift-Enter and a line
 * ending in `\` (the `\` dropped) continue it; the next other line ends it.
 */
export class PromptLines {
  /** The lines so far, each ending in a newline. */
  continued = "";
  pasting = false;
  /** The line being entered was ended with Shift-Enter. */
  softBreak = false;
  /** The prompt for the next line: `› `, or `… ` inside a multi-line prompt. */
  prompt = PROMPT;

  /** The whole prompt when `line` ends it, else null. */
  push(line: string): string | null {
    if (this.pasting || this.softBreak || line.endsWith("\\")) {
      this.continued += (this.pasting || this.softBreak ? line : line.slice(0, -1)) + "\n";
      this.softBreak = false;
      if (!this.pasting) this.prompt = MORE;
      return null;
    }
    const full = this.continued + line;
    this.continued = "";
    this.prompt = PROMPT;
    return full;
  }

  /** True when readline's history entry for the line being entered is not a whole prompt (it is skipped). */
  partial(entry: string | undefined): boolean {
    return this.pasting || this.softBreak || entry?.endsWith("\\") === true;
  }
}
