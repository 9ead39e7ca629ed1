/**
 * The stdio transport Berth starts MCP servers with: the SDK's `StdioClientTransport` plus a bound on one message
 * line of the server's stdout (the SDK buffers a line until its newline). Contracts:
 * - The bytes since the last `\n` are counted as they arrive, before the SDK buffers them (a counter, never a copy).
 *   A line of exactly `maxLineBytes` bytes (newline excluded) is accepted; at byte `maxLineBytes + 1` without a
 *   newline, stdout is no longer read (destroyed: the SDK's buffer stops growing, the server's next write fails) and
 *   `onLineOverflow` is called, once. Stopping the server is the caller's (close the client, as for any other close).
 * - The SDK's own read-buffer bound (default 10 MB, which would refuse lines this bound accepts) is raised to
 *   `maxLineBytes` plus one read's slack; it stays as a backstop and never fires first.
 * - The SDK keeps the child process private: `start` reaches it by its name and checks its shape. If it is not there
 *   (an SDK that renamed it), the server is stopped and `start` fails naming the cause: a server never runs unbounded.
 *   A spawn failure (no such command) is reported as before.
 */
import { Readable } from "node:stream";
import { StdioClientTransport, type StdioServerParameters } from "@modelcontextprotocol/sdk/client/stdio.js";

/**
 * Room above the line bound in the SDK's read buffer: it holds the open line (at most the bound, or we stopped
 * reading) plus the read being appended (64 KiB from a pipe).
 */
const SDK_BUFFER_SLACK_BYTES = 1024 * 1024;

const UNWATCHABLE =
  "the MCP SDK's stdio transport no longer exposes the server process, so its output cannot be bounded; the server was stopped (Berth's MCP client needs updating for this SDK version)";

/**
 * The bytes since the last `\n` once `chunk` is counted after `run` such bytes, or null when a line passes `max`
 * bytes (newline excluded), whether it ends in this chunk or not.
 */
export function countLineBytes(run: number, chunk: Uint8Array, max: number): number | null {
  let start = 0;
  for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
    if (run + (nl - start) > max) return null;
    run = 0;
    start = nl + 1;
  }
  run += chunk.length - start;
  return run > max ? null : run;
}

/** The child's stdout, reached through the SDK's private `_process`; null when that is not a process with a stdout. */
function childStdout(transport: StdioClientTransport): Readable | null {
  const child: unknown = Reflect.get(transport, "_process");
  const stdout: unknown = typeof child === "object" && child !== null ? Reflect.get(child, "stdout") : null;
  return stdout instanceof Readable ? stdout : null;
}

export class BoundedStdioTransport extends StdioClientTransport {
  private lineBytes = 0;
  private overflowed = false;

  constructor(
    server: StdioServerParameters,
    private readonly maxLineBytes: number,
    private readonly onLineOverflow: () => void,
  ) {
    super({ ...server, maxBufferSize: maxLineBytes + SDK_BUFFER_SLACK_BYTES });
  }

  override async start(): Promise<void> {
    // The SDK spawns the process and adds its stdout listener synchronously; ours goes first, before any data.
    const started = super.start();
    const stdout = childStdout(this);
    stdout?.prependListener("data", (chunk: Buffer) => this.count(stdout, chunk));
    await started;
    if (stdout === null) {
      await this.close();
      throw new Error(UNWATCHABLE);
    }
  }

  private count(stdout: Readable, chunk: Buffer): void {
    if (this.overflowed) return;
    const run = countLineBytes(this.lineBytes, chunk, this.maxLineBytes);
    if (run !== null) {
      this.lineBytes = run;
      return;
    }
    this.overflowed = true;
    stdout.destroy();
    this.onLineOverflow();
  }
}
