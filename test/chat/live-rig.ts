/**
 * The interactive chat's answer path in process: a fake terminal of `cols`×`rows` (what it receives, as a
 * pseudo-terminal turns "\n" into "\r\n", and how many bytes), the chat's `Screen` on it and a `LiveAnswer` with the
 * markdown renderer writing through that screen, as the chat wires them.
 */
import { EventEmitter } from "node:events";
import { LiveAnswer } from "../../src/cli/chat/live.js";
import { MarkdownStream } from "../../src/cli/chat/markdown.js";
import { Screen } from "../../src/cli/chat/screen.js";

export interface FakeTerminal extends EventEmitter {
  text: string;
  columns: number;
  rows: number;
  isTTY: true;
  write(s: string): boolean;
}

export function liveAnswerOn(cols: number, rows: number): { out: FakeTerminal; screen: Screen; answer: LiveAnswer; bytes: () => number } {
  let bytes = 0;
  const out: FakeTerminal = Object.assign(new EventEmitter(), {
    text: "",
    columns: cols,
    rows,
    isTTY: true as const,
    write(s: string): boolean {
      bytes += Buffer.byteLength(s);
      out.text += s.replace(/\n/g, "\r\n");
      return true;
    },
  });
  const screen = new Screen(out as unknown as NodeJS.WriteStream, true);
  const answer = new LiveAnswer(new MarkdownStream(false), {
    write: (t) => screen.write(t),
    transient: (t) => screen.transient(t),
    control: (t) => screen.control(t),
    size: () => screen.size(),
  });
  return { out, screen, answer, bytes: () => bytes };
}
