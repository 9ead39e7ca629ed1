/**
 * Ctrl-Z in the interactive chat: the terminal goes back to the shell as it was before the chat (line mode and echo,
 * no footer or scroll region, bracketed paste off) and the process stops; `fg` (SIGCONT) takes the terminal back
 * (raw mode, bracketed paste, the footer pinned again) and `resumed` shows what was being typed or asked.
 * readline's own suspension restored only line mode, and after `fg` left its input paused: the chat took no input.
 */
import type { Screen } from "./screen.js";

export function suspendToShell(screen: Screen, input: { setRawMode(mode: boolean): unknown }, resumed: () => void): void {
  screen.suspend();
  process.stdout.write("\x1b[?2004l");
  input.setRawMode(false);
  process.once("SIGCONT", () => {
    input.setRawMode(true);
    process.stdout.write("\x1b[?2004h");
    screen.resume();
    resumed();
  });
  process.kill(process.pid, "SIGTSTP");
}
