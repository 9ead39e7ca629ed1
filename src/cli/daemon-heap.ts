/**
 * The daemon's heap policy, applied when this module is evaluated. `daemon.ts` imports it first, so it holds before
 * the daemon's other modules run (they are already parsed by then, which leaves V8's young generation at two 4 MB
 * semi-spaces; it stays there).
 *
 * Why (docs/scv.md §Performance): a long-lived daemon streaming 20,000-delta answers let V8 grow the young
 * generation to its default maximum (two 16 MB semi-spaces, both touched) and let the garbage promoted by scavenges
 * pile up in the old generation: a peak RSS of about 125 MB against an idle 80 MB. Not growing the young
 * generation (`--semi-space-growth-factor=1`) and collecting the old generation once it grew by a quarter
 * (`--heap-growing-percent=25`) keep the peak near 98 MB, for about 10 % more CPU on the longest turns. Both are
 * growth policies V8 consults at every collection, so setting them after startup takes effect (measured;
 * `--max-semi-space-size` does not: it is fixed when the heap is set up, and `node bin/berth daemon` gives no
 * earlier point). `BERTH_DAEMON_V8_FLAGS` replaces them; an empty value keeps V8's defaults.
 */
import { setFlagsFromString } from "node:v8";

export const DAEMON_V8_FLAGS = "--semi-space-growth-factor=1 --heap-growing-percent=25";

const flags = process.env["BERTH_DAEMON_V8_FLAGS"] ?? DAEMON_V8_FLAGS;
if (flags.trim() !== "") setFlagsFromString(flags);
