/** `<state dir>/endpoint.json`: `{pid, http, ui}` of the running daemon, written by `berth daemon`, read by `berth open`. */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const ENDPOINT_FILE = "endpoint.json";

export interface Endpoint {
  pid: number;
  /** The daemon's HTTP base (`http://127.0.0.1:PORT`). */
  http: string;
  /** Its web UI's URL, without the token. */
  ui: string;
}

/** The endpoint record in `stateDir`, or null when it is missing, unreadable or not of that shape. */
export function readEndpoint(stateDir: string): Endpoint | null {
  try {
    const rec = JSON.parse(readFileSync(join(stateDir, ENDPOINT_FILE), "utf8")) as Partial<Record<keyof Endpoint, unknown>>;
    if (typeof rec.pid !== "number" || !Number.isSafeInteger(rec.pid) || typeof rec.http !== "string" || typeof rec.ui !== "string") return null;
    if (!/^http:\/\/[\w.:[\]-]{1,200}$/.test(rec.http)) return null;
    return { pid: rec.pid, http: rec.http, ui: rec.ui };
  } catch {
    return null;
  }
}
