/**
 * The SDK answers params that fail ACP's schema with `-32602` and the bare message "Invalid params"; the cause is
 * only in `data` (zod's formatted error tree), which editors rarely show.
 *
 * Contracts:
 * - Such an answer's message becomes `Invalid params: <field>: <problem>; correct it to match ACP's schema for this
 *   method and send the request again`, naming the first field with a problem (depth-first, in the tree's order;
 *   `prompt[1].text`, or `params` for the params themselves), zod's "Invalid input: " prefix dropped. Field and problem
 *   are shown on one line (control characters as `<U+XXXX>`) and cut to `MAX_PART` characters. `data` is unchanged.
 * - Every other message is passed as it is (Berth's own `-32602` messages already say what is wrong).
 */
import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";
import { visibleOnOneLine } from "../../core/visible-controls.js";

const MAX_PART = 200;
const MAX_DEPTH = 32;

type Tree = { _errors?: unknown } & Record<string, unknown>;
const isTree = (v: unknown): v is Tree => typeof v === "object" && v !== null && !Array.isArray(v);

/** The first problem in zod's formatted tree: its field path and message. */
function firstProblem(node: Tree, path: string, depth: number): { path: string; problem: string } | null {
  const own = node._errors;
  if (Array.isArray(own) && typeof own[0] === "string") return { path: path === "" ? "params" : path, problem: own[0] };
  if (depth === MAX_DEPTH) return null;
  for (const [key, child] of Object.entries(node)) {
    if (key === "_errors" || !isTree(child)) continue;
    const found = firstProblem(child, /^\d+$/.test(key) ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`, depth + 1);
    if (found !== null) return found;
  }
  return null;
}

const cut = (s: string): string => {
  const v = visibleOnOneLine(s.length > MAX_PART * 2 ? s.slice(0, MAX_PART * 2) : s);
  return v.length > MAX_PART ? `${v.slice(0, MAX_PART - 1)}…` : v;
};

/** The explained form of the SDK's bare schema failure, or `msg` as it is. */
export function explainInvalidParams(msg: AnyMessage): AnyMessage {
  if ("method" in msg || !("error" in msg)) return msg;
  const { code, message, data } = msg.error as { code?: unknown; message?: unknown; data?: unknown };
  if (code !== -32602 || message !== "Invalid params" || !isTree(data)) return msg;
  const found = firstProblem(data, "", 0);
  if (found === null) return msg;
  const problem = found.problem.replace(/^Invalid input: /, "");
  const explained = `Invalid params: ${cut(found.path)}: ${cut(problem)}; correct it to match ACP's schema for this method and send the request again`;
  return { ...msg, error: { ...msg.error, message: explained } };
}

/** `s` with the SDK's bare schema failures explained as they are written. */
export function explainingInvalidParams(s: Stream): Stream {
  const writer = s.writable.getWriter();
  const writable = new WritableStream<AnyMessage>({
    write: (msg) => writer.write(explainInvalidParams(msg)),
    close: () => writer.close(),
    abort: (reason) => writer.abort(reason),
  });
  return { readable: s.readable, writable };
}
