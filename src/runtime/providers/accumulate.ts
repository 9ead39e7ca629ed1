/**
 * Per-response accounting shared by the three wire decoders: assistant text bytes, tool-call
 * count and per-call argument bytes, each checked incrementally (no re-concatenation per delta).
 */
import { PROVIDER_BOUNDS } from "../types.js";
import { LABELS, limitFailure, protocolFailure, ProviderFailure } from "./errors.js";

export type ProviderBounds = { readonly [K in keyof typeof PROVIDER_BOUNDS]: number };

/** UTF-8 byte length without allocating. */
export function utf8Bytes(s: string): number {
  // Every UTF-16 unit is 1..3 UTF-8 bytes; pure-ASCII strings (the common case) need no native call.
  const n = s.length;
  if (n < 64) {
    for (let i = 0; i < n; i++) {
      if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s, "utf8");
    }
    return n;
  }
  return Buffer.byteLength(s, "utf8");
}

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses one event's data as a JSON object; anything else is a protocol failure. */
export function parseEventObject(data: string): JsonObject {
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    throw protocolFailure();
  }
  if (!isObject(v)) throw protocolFailure();
  return v;
}

export function reqString(o: JsonObject, key: string): string {
  const v = o[key];
  if (typeof v !== "string") throw protocolFailure();
  return v;
}

export function optString(o: JsonObject, key: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw protocolFailure();
  return v;
}

/**
 * A non-negative integer count, or undefined when absent/null. A count past `Number.MAX_SAFE_INTEGER` (a provider's
 * 1e300) is clamped to it: a usage figure is not worth failing a turn over, and unclamped it reached session records
 * and usage sums (which overflow to Infinity, serialised as null).
 */
export function optCount(o: JsonObject | undefined, key: string): number | undefined {
  if (o === undefined) return undefined;
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw protocolFailure();
  return clampCount(Math.floor(v));
}

/** `n` at most `Number.MAX_SAFE_INTEGER` (for a sum of counts, each clamped alone). */
export function clampCount(n: number): number {
  return n > Number.MAX_SAFE_INTEGER ? Number.MAX_SAFE_INTEGER : n;
}

export function optObject(o: JsonObject, key: string): JsonObject | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw protocolFailure();
  return v;
}

/** Text and tool-call budgets of one response. */
export class ResponseBudget {
  private textBytes = 0;
  private toolCalls = 0;
  constructor(readonly bounds: ProviderBounds) {}

  /** Counts one assistant text delta; throws `limit` once the total exceeds the bound. */
  addText(delta: string): void {
    this.textBytes += utf8Bytes(delta);
    if (this.textBytes > this.bounds.maxAssistantTextBytes) throw limitFailure(LABELS.textLimit);
  }

  /** Counts one started tool call; the (max+1)-th throws `limit`. */
  addToolCall(): void {
    this.toolCalls += 1;
    if (this.toolCalls > this.bounds.maxToolCallsPerResponse) throw limitFailure(LABELS.toolCountLimit);
  }

  newArgs(): ToolArgs {
    return new ToolArgs(this.bounds.maxToolArgumentBytes);
  }
}

/** One tool call's streamed argument JSON, bounded in UTF-8 bytes. */
export class ToolArgs {
  private parts: string[] = [];
  private bytes = 0;
  constructor(private readonly max: number) {}

  add(fragment: string): void {
    if (fragment.length === 0) return;
    this.bytes += utf8Bytes(fragment);
    if (this.bytes > this.max) throw limitFailure(LABELS.toolArgsLimit);
    this.parts.push(fragment);
  }

  /** Replaces the accumulated text with the provider's authoritative full argument string. */
  replace(full: string): void {
    const bytes = utf8Bytes(full);
    if (bytes > this.max) throw limitFailure(LABELS.toolArgsLimit);
    this.parts = [full];
    this.bytes = bytes;
  }

  get empty(): boolean {
    return this.bytes === 0;
  }

  /** Parses the arguments; empty text is `{}`; anything but a JSON object is a protocol failure. */
  parse(): Record<string, unknown> {
    if (this.bytes === 0) return {};
    const text = this.parts.length === 1 ? (this.parts[0] ?? "") : this.parts.join("");
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      throw new ProviderFailure("protocol", LABELS.badToolArgs, false);
    }
    if (!isObject(v)) throw new ProviderFailure("protocol", LABELS.badToolArgs, false);
    return v;
  }
}

/** Joins accumulated parts once (used for thinking blocks, reasoning summaries). */
export class TextParts {
  private parts: string[] = [];
  add(s: string): void {
    if (s.length > 0) this.parts.push(s);
  }
  text(): string {
    return this.parts.length === 1 ? (this.parts[0] ?? "") : this.parts.join("");
  }
}
