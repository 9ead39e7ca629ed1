/**
 * Text from outside Berth that may hold terminal bytes (a command's output, a fetched web page) made plain text for
 * a model. Pure. Contract of `cleanOutput`: ANSI/VT escape sequences (colours, cursor moves, OSC titles and
 * clipboard writes, 8-bit CSI) are removed; CRLF and lone CR (progress bars) become LF; every other control
 * character except TAB and LF is shown as its Unicode control picture (NUL → ␀, BEL → ␇, DEL → ␡), so separators
 * such as `find -print0`'s stay visible; C1 controls become U+FFFD. Text without any of them is returned unchanged.
 */

// CSI (ESC [ … final, or the 8-bit U+009B), string commands (OSC ESC ], DCS ESC P, SOS ESC X, PM ESC ^, APC ESC _)
// up to BEL or ST (an unterminated one ends at the line's end), and the other ESC sequences (charset, keypad, save).
const ESCAPES = /(?:\x1b\[|\u009b)[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]/g;
const CONTROLS = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;
const C1 = /[\u0080-\u009f]/g;

/** Terminal output as plain text (see the module contract). */
export function cleanOutput(s: string): string {
  return s
    .replace(ESCAPES, "")
    .replace(/\r\n?/g, "\n")
    .replace(CONTROLS, (c) => String.fromCharCode(c === "\x7f" ? 0x2421 : 0x2400 + c.charCodeAt(0)))
    .replace(C1, "\uFFFD");
}
