/**
 * Owner-only durable files for channel credentials and delivery state.
 * Contract: directories 0700, files 0600; a write is atomic (temp file, fsync, rename, directory fsync), so a crash
 * leaves either the old or the new content, never a torn file.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { IrregularFileError, readRegularFile } from "../../store/regular-file.js";

/** The largest channel file (settings, credentials, delivery state) read: far past any real one. */
export const MAX_CHANNEL_FILE_BYTES = 64 * 1024 * 1024;

export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

export async function writePrivateAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const dir = dirname(path);
  await ensurePrivateDir(dir);
  const tmp = join(dir, `.${randomBytes(6).toString("hex")}.tmp`);
  const fh = await open(tmp, "wx", 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  const d = await open(dir, "r");
  try {
    await d.sync();
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic.
  } finally {
    await d.close();
  }
}

/**
 * Reads a JSON file; null when it does not exist. A corrupt file throws `<path> is not valid JSON` (the caller reports
 * it; nothing is overwritten) — never the parser's own message, which quotes the text around the fault and so could
 * quote a token or secret from a credentials file. A FIFO, device, directory or a file over MAX_CHANNEL_FILE_BYTES
 * throws `<path> cannot be read: it …; move it away`, without reading (or waiting on) it; any other failure to read
 * it, `<path> cannot be read (<code>): …`.
 */
export async function readJsonFile(path: string): Promise<unknown> {
  let text: string;
  try {
    // Never blocks: a FIFO or device placed here would otherwise hang `berth channel status` and the daemon's
    // reconciliation on the open (store/regular-file.ts).
    text = (await readRegularFile(path, MAX_CHANNEL_FILE_BYTES)).toString("utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    if (err instanceof IrregularFileError) throw new Error(`${path} cannot be read: it ${err.message}${err.code === "EFBIG" ? ` (over ${MAX_CHANNEL_FILE_BYTES / (1024 * 1024)} MiB)` : ""}; move it away`);
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`${path} cannot be read (${typeof code === "string" ? code : "I/O error"}): check that it is a file your user may read`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error(`${path} is not valid JSON`);
  }
}

export const ACCOUNT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function checkAccountName(name: string): void {
  if (!ACCOUNT_NAME.test(name)) throw new Error(`invalid account name '${name.slice(0, 64)}': use 1-64 of A-Z a-z 0-9 _ -`);
}

export interface ChannelPaths {
  credentials: string;
  state: string;
  media: string;
  outbox: string;
}

/** Where one account's files live under `$MC_HOME`. */
export function channelPaths(home: string, channel: "wechat" | "feishu", account: string): ChannelPaths {
  checkAccountName(account);
  return {
    credentials: join(home, "channels", channel, `${account}.json`),
    state: join(home, "state", "channels", channel, `${account}.json`),
    media: join(home, "state", "media", channel, account),
    outbox: join(home, "state", "media", "outbox"),
  };
}
