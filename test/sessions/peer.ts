/** The hold-peer child (hold-peer.ts) as the append-lock tests drive it. */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const PEER = fileURLToPath(new URL("./hold-peer.js", import.meta.url));

/** Runs the peer child; resolves with its first output line (and the child, still running but for `read`). */
export function peer(home: string, id: string, mode: "read" | "hold" | "batch" | "take"): { line: Promise<string>; kill: () => Promise<void> } {
  const child = spawn(process.execPath, [PEER, home, id, mode], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const line = new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve(out.slice(0, nl));
    });
    child.on("exit", (code) => reject(new Error(`peer exited ${code} before a line: ${out}`)));
  });
  const closed = new Promise((r) => child.once("close", r));
  return {
    line,
    kill: async () => {
      child.kill("SIGKILL");
      await closed;
    },
  };
}
