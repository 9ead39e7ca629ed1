/**
 * Owner-only durable files for channel credentials and delivery state.
 * Contract: directories 0700, files 0600; a write is atomic (temp file, fsync, rename, directory fsync), so a crash
 * leaves either the old or the new content, never a torn file.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { IrregularFileError } from "../../store/regular-file.js";
import { JsonFileError, MAX_JSON_DEPTH, readBoundedJsonFile } from "../../store/settings/locked-json.js";

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
 * A channel file that cannot be used. `setAside`: the file itself is the problem (not JSON, not UTF-8, nested past
 * MAX_JSON_DEPTH, over the bound, not a regular file), so moving it away is the fix; otherwise reading it failed
 * (permissions, I/O, out of file descriptors) and the file may be fine.
 */
export class ChannelFileError extends Error {
  override name = "ChannelFileError";
  constructor(
    message: string,
    readonly setAside: boolean,
  ) {
    super(message);
  }
}

/**
 * Reads a JSON file through the stores' bounded reader (store/settings/locked-json.ts `readBoundedJsonFile`: a regular
 * file checked before a byte is read, at most MAX_CHANNEL_FILE_BYTES, UTF-8, a leading BOM skipped, at most
 * MAX_JSON_DEPTH levels); null when it does not exist. Throws `ChannelFileError`: `<path> is not valid JSON` for a
 * parse failure — never the parser's own message, which quotes the text around the fault and so could quote a token
 * or secret from a credentials file —, `<path> cannot be read: it …; move it away` for the other faults of the file
 * itself, and `<path> cannot be read (<code>): …` when reading failed.
 */
export async function readJsonFile(path: string): Promise<unknown> {
  try {
    return (await readBoundedJsonFile(path, MAX_CHANNEL_FILE_BYTES)) ?? null;
  } catch (err) {
    if (!(err instanceof JsonFileError)) throw err;
    const moveAway = (what: string): ChannelFileError => new ChannelFileError(`${path} cannot be read: it ${what}; move it away`, true);
    switch (err.reason) {
      case "malformed":
        throw new ChannelFileError(`${path} is not valid JSON`, true);
      case "not_utf8":
        throw moveAway("is not UTF-8 text");
      case "too_deep":
        throw moveAway(`nests deeper than ${MAX_JSON_DEPTH} levels`);
      case "too_large":
        throw moveAway(`is too large (over ${MAX_CHANNEL_FILE_BYTES / (1024 * 1024)} MiB)`);
      case "not_file":
        throw moveAway(err.cause instanceof IrregularFileError ? err.cause.message : "is not a regular file");
      case "unreadable":
      case "lock_failed":
      case "write_failed": {
        const code = (err.cause as NodeJS.ErrnoException | undefined)?.code;
        throw new ChannelFileError(`${path} cannot be read (${typeof code === "string" ? code : "I/O error"}): check that it is a file your user may read`, false);
      }
    }
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
