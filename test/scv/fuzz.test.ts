/**
 * Seeded fuzzer for the SCV v3 door over both transports (a spawned `berth stdio` and a socket of a spawned
 * `berth daemon`), with an oracle: every generated case is followed by a marker request (a `turn.cancel` of an
 * unknown turn, answered `turn_not_found` with the marker's ID), so the `error` frames between two markers are the
 * replies to one case. Cases with a known answer (invalid UTF-8, non-objects, wrong field types on every request
 * type, huge numbers, deep nesting in ignored fields, lines at and one past 1 MiB, prompts at and one past 256 KiB,
 * empty lines) must get exactly the spec's code and fixed message (docs/scv.md "Check order"); text-mutated cases
 * may get at most one error, with a known code and a bounded message. Lines end in LF or CRLF at random and are
 * written in random chunks that split multi-byte characters and lines. Afterwards: the connection still answers,
 * `seq` has no gap, every output line is a JSON object of well-formed Unicode, every started turn ended once, a
 * final turn completes, every completed turn is in the session file, stdio exits 0 and the daemon keeps serving.
 * `FUZZ_SEED` / `FUZZ_COUNT` (cases per transport) reproduce or lengthen a run.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { decodeMessage, MAX_CLIENT_FRAME_BYTES, MAX_PROMPT_BYTES, MESSAGES } from "../../src/protocols/scv/wire.js";
import { prng } from "../helpers/prng.js";
import { ScvClient, spawnStdio, startDaemon, startRig, type Msg, type Rig } from "./client.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261202);
const COUNT = Number(process.env.FUZZ_COUNT ?? 240);
const PER_CONN = 120;

type Rand = () => number;
const pick = <T>(r: Rand, a: readonly T[]): T => a[Math.floor(r() * a.length)]!;

/** What one case must get: exactly this error, no error at all, or at most one error of a known code. */
type Expect = { code: string; message: string; rid: string | null } | "none" | "any";

interface Case {
  bytes: Buffer;
  expect: Expect;
  what: string;
}

const ALLOWED_CODES = new Set([
  "invalid_json",
  "invalid_request",
  "not_initialized",
  "session_not_found",
  "turn_active",
  "turn_not_found",
  "approval_not_found",
  "queue_not_found",
  "queue_conflict",
  "queue_limit",
  "unsupported",
  "component_error",
  "confirm_error",
  "delegation_error",
  "restart_error",
]);

/** A placeholder replaced by raw JSON text (numbers JSON.stringify cannot write). */
const raws: string[] = [];
const RAW = (text: string): string => `\u0000RAW${raws.push(text) - 1}`;
const serialize = (o: unknown): string => JSON.stringify(o).replace(/"\\u0000RAW(\d+)"/g, (_m, n: string) => raws[Number(n)]!);

const ODD: readonly unknown[] = [null, 0, -1, 1.5, true, false, "", [], {}, [1, [2]], { a: 1 }, "x", "é😀"];
const HUGE = ["1e999", "-1e999", "9007199254740993", "1e-400", "-0", "1.0", "12345678901234567890123", "0.5", "-1", "1E2", "2e0"];

type Kind = "str" | "prompt" | "bool" | "boolD" | "uint" | "optStr" | "uintOpt";
interface TypeSpec {
  fields: Array<[string, Kind]>;
  base: (sid: string, i: number) => Msg;
}
const TYPES: Record<string, TypeSpec> = {
  "turn.start": { fields: [["session_id", "str"], ["prompt", "prompt"]], base: (sid, i) => ({ session_id: sid, prompt: `p${i}` }) },
  "turn.cancel": { fields: [["session_id", "str"], ["turn_id", "str"]], base: (sid) => ({ session_id: sid, turn_id: "~no-turn" }) },
  "approval.resolve": {
    fields: [["session_id", "str"], ["approval_id", "str"], ["approved", "bool"]],
    base: (sid) => ({ session_id: sid, approval_id: "~no-approval", approved: true }),
  },
  "session.clear": { fields: [["session_id", "str"]], base: () => ({ session_id: "~other" }) },
  "session.pause": { fields: [["session_id", "str"], ["paused", "bool"]], base: () => ({ session_id: "~other", paused: true }) },
  "session.mcp": { fields: [["session_id", "str"]], base: (sid) => ({ session_id: sid }) },
  "session.tools": { fields: [["session_id", "str"]], base: (sid) => ({ session_id: sid }) },
  "queue.update": {
    fields: [["session_id", "str"], ["queue_id", "str"], ["revision", "uint"], ["prompt", "prompt"]],
    base: (sid) => ({ session_id: sid, queue_id: "~no-entry", revision: 1, prompt: "u" }),
  },
  "queue.move": {
    fields: [["session_id", "str"], ["queue_id", "str"], ["revision", "uint"], ["before_queue_id", "optStr"]],
    base: (sid) => ({ session_id: sid, queue_id: "~no-entry", revision: 1, before_queue_id: null }),
  },
  "queue.remove": {
    fields: [["session_id", "str"], ["queue_id", "str"], ["revision", "uint"]],
    base: (sid) => ({ session_id: sid, queue_id: "~no-entry", revision: 1 }),
  },
  "session.start": {
    fields: [
      ["cwd", "str"],
      ["provider", "optStr"],
      ["model", "optStr"],
      ["base_url", "optStr"],
      ["no_tools", "boolD"],
      ["channel", "optStr"],
      ["auto_approve", "boolD"],
      ["delegation_depth", "uintOpt"],
      ["resume", "optStr"],
    ],
    base: () => ({ cwd: "/" }),
  },
};

/** A value that breaks a field of `kind`, and the fixed message it must get (null: the value is acceptable). */
function breakField(r: Rand, name: string, kind: Kind): { value: unknown; message: string | null } {
  if (kind === "uint" || kind === "uintOpt") {
    if (r() < 0.6) {
      const t = pick(r, HUGE);
      const n = JSON.parse(t) as number;
      return { value: RAW(t), message: Number.isSafeInteger(n) && n >= 0 ? null : `\`${name}\` must be a non-negative integer` };
    }
    const v = pick(r, ODD.filter((x) => kind === "uint" || x !== null));
    return { value: v, message: typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? null : `\`${name}\` must be a non-negative integer` };
  }
  const candidates = ODD.filter((x) => {
    if (kind === "str") return !(typeof x === "string" && x !== "");
    if (kind === "prompt") return typeof x !== "string";
    if (kind === "bool") return typeof x !== "boolean";
    if (kind === "boolD") return typeof x !== "boolean" && x !== null;
    return x !== null && !(typeof x === "string" && x !== ""); // optStr
  });
  const value = pick(r, candidates);
  const message =
    kind === "str" || kind === "optStr"
      ? `\`${name}\` must be a non-empty string`
      : kind === "prompt"
        ? "`prompt` must be a string"
        : `\`${name}\` must be a boolean`;
  return { value, message };
}

/** Fixed breakages of structured fields, each with its fixed message. */
const STRUCTURED: Array<{ type: string; field: string; value: unknown; message: string }> = [
  { type: "turn.start", field: "attachments", value: "x", message: "`attachments` must be an array" },
  { type: "turn.start", field: "attachments", value: Array.from({ length: 17 }, () => ({ kind: "file", path: "/x", size: 1 })), message: "at most 16 attachments per prompt; send the rest with another turn.start" },
  { type: "turn.start", field: "attachments", value: [1], message: "attachment 0 must be an object" },
  { type: "turn.start", field: "attachments", value: [{ kind: "pdf", path: "/x", size: 1 }], message: "attachment 0: `kind` must be one of image, audio, video, file, sticker" },
  { type: "turn.start", field: "attachments", value: [{ kind: "file", path: "rel/x", size: 1 }], message: "attachment 0: `path` must be an absolute path" },
  { type: "turn.start", field: "attachments", value: [{ kind: "file", path: "/x", size: RAW("1e999") }], message: "attachment 0: `size` must be a non-negative integer" },
  { type: "turn.start", field: "attachments", value: [{ kind: "file", path: "/x", size: 1, name: 5 }], message: "attachment 0: `name` must be a string" },
  { type: "turn.start", field: "prompt", value: "", message: "`prompt` may be empty (or only whitespace) only with attachments" },
  { type: "turn.start", field: "prompt", value: " \t\u3000", message: "`prompt` may be empty (or only whitespace) only with attachments" },
  { type: "session.start", field: "channel", value: "x".repeat(33), message: "`channel` must be at most 32 bytes without control characters" },
  { type: "session.start", field: "channel", value: "a\u0007b", message: "`channel` must be at most 32 bytes without control characters" },
  { type: "session.start", field: "mcp_servers", value: "x", message: "`mcp_servers` must be an object of servers" },
  { type: "session.start", field: "mcp_servers", value: { a: { command: "" } }, message: "`mcp_servers`.a.command must be a non-empty string" },
  { type: "daemon.control", field: "command", value: "status", message: "`command.action` must be a string" },
  { type: "daemon.control", field: "command", value: { action: 5 }, message: "`command.action` must be a string" },
];

/** A prompt of exactly `bytes` UTF-8 bytes mixing 1-, 2-, 3- and 4-byte characters. */
function promptOf(bytes: number): string {
  const unit = "aé€😀"; // 1 + 2 + 3 + 4 bytes
  const s = unit.repeat(Math.floor(bytes / 10));
  return s + "a".repeat(bytes - Buffer.byteLength(s));
}

/** A JSON object text of exactly `bytes` bytes. */
function sized(bytes: number, base: Msg): string {
  const head = JSON.stringify({ ...base, pad: "" });
  return JSON.stringify({ ...base, pad: "a".repeat(bytes - Buffer.byteLength(head)) });
}

const text = (s: string, expect: Expect, what: string): Case => ({ bytes: Buffer.from(s), expect, what });
const err = (code: string, message: string, rid: string | null = null) => ({ code, message, rid });

function mutateText(r: Rand, s: string): string {
  const PIECES = ["{", "}", "[", "]", '"', ":", ",", "\\", "\\u00", "\\ud800", "é", "😀", "\r", " ", "null", "1e999", "-0", "true", "\u2028", "\u0000", "__proto__"];
  const chars = [...s];
  for (let k = 0; k < 1 + Math.floor(r() * 4); k++) {
    const at = Math.floor(r() * (chars.length + 1));
    const op = r();
    if (op < 0.4) chars.splice(at, 1);
    else if (op < 0.8) chars.splice(at, 0, pick(r, PIECES));
    else chars.splice(at, 1, pick(r, PIECES));
  }
  return chars.join("").replace(/\n/g, "");
}

/** One random case for a connection whose session is `sid`. */
function genCase(r: Rand, i: number, sid: string, socket: boolean): Case {
  const rid = `f${i}`;
  const x = r();
  if (x < 0.3) {
    // A request type with one field broken (or none).
    const type = pick(r, Object.keys(TYPES));
    const spec = TYPES[type]!;
    const m: Msg = { type, request_id: rid, ...spec.base(sid, i) };
    if (r() < 0.2) return text(serialize(m), "any", `valid ${type}`);
    const [name, kind] = pick(r, spec.fields);
    const b = breakField(r, name, kind);
    m[name] = b.value;
    // session.start is checked field by field before "one session per connection".
    const expect: Expect =
      b.message !== null ? err("invalid_request", b.message, rid) : type === "session.start" ? err("invalid_request", "this connection already has a session (one session per connection)", rid) : "any";
    return text(serialize(m), expect, `${type}.${name}=${serialize(b.value).slice(0, 40)}`);
  }
  if (x < 0.36) {
    const s = pick(r, STRUCTURED);
    const m: Msg = { type: s.type, request_id: rid, ...(TYPES[s.type]?.base(sid, i) ?? {}), [s.field]: s.value };
    return text(serialize(m), err("invalid_request", s.message, rid), `${s.type}.${s.field}`);
  }
  if (x < 0.42) {
    // Envelope breakage: request_id, type.
    const y = r();
    if (y < 0.35) {
      const m: Msg = { type: pick(r, Object.keys(TYPES)), session_id: sid };
      if (r() < 0.7) m.request_id = pick(r, [5, null, [], {}, true, RAW("1e999")]);
      return text(serialize(m), err("invalid_request", MESSAGES.noRequestId), "bad request_id");
    }
    if (y < 0.6) {
      const m: Msg = { type: pick(r, [5, null, [], {}, false]), request_id: rid };
      return text(serialize(m), err("invalid_json", MESSAGES.noType, rid), "bad type");
    }
    const t = pick(r, ["turn.Start", "__proto__", "constructor", "toString", "hasOwnProperty", "x".repeat(100), "a" + "😀".repeat(40), "é".repeat(70), ""]);
    return text(serialize({ type: t, request_id: rid }), "any", `unknown type ${t.slice(0, 20)}`);
  }
  if (x < 0.47) {
    // Not valid UTF-8: never parsed, so no request_id.
    const bad = pick(r, [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80], [0xfe, 0xff]]);
    const [a, b] = [`{"type":"turn.cancel","request_id":"${rid}","session_id":"`, `","turn_id":"x"}`];
    return { bytes: Buffer.concat([Buffer.from(a), Buffer.from(bad), Buffer.from(b)]), expect: err("invalid_json", MESSAGES.notUtf8), what: `bad utf-8 ${bad.join(",")}` };
  }
  if (x < 0.52) {
    // Valid JSON that is not an object (deep arrays included), or not JSON.
    const d = 1 + Math.floor(r() * (r() < 0.2 ? 100_000 : 50));
    const t = pick(r, ["[]", "1", '"s"', "null", "true", "[".repeat(d) + "]".repeat(d), "   ", "\uFEFF{}", "{", "}", "{}{}", "\u2028"]);
    return text(t, err("invalid_json", MESSAGES.notJson), `not an object: ${t.slice(0, 12)}`);
  }
  if (x < 0.57) {
    // Deep nesting and huge numbers in an ignored field: the message itself is still handled.
    // At most 400 KB / 900 KB of nesting: the line stays within the frame limit.
    const d = 1 + Math.floor(r() * (r() < 0.2 ? 150_000 : 500));
    const deep = r() < 0.5 ? "[".repeat(d) + "]".repeat(d) : '{"a":'.repeat(d) + pick(r, HUGE) + "}".repeat(d);
    const m = { type: "turn.cancel", request_id: rid, session_id: sid, turn_id: "~no-turn", extra: RAW(deep), big: RAW(pick(r, HUGE)) };
    return text(serialize(m), err("turn_not_found", "no running turn with this ID", rid), `deep ${d}`);
  }
  if (x < 0.62) {
    // Huge and odd numbers where an integer is required.
    const t = pick(r, HUGE);
    const n = JSON.parse(t) as number;
    const ok = Number.isSafeInteger(n) && n >= 0;
    const m = { type: "queue.remove", request_id: rid, session_id: sid, queue_id: "~no-entry", revision: RAW(t) };
    return text(serialize(m), ok ? err("queue_not_found", "no queued entry with this ID", rid) : err("invalid_request", "`revision` must be a non-negative integer", rid), `revision ${t}`);
  }
  if (x < 0.64) return text("", "none", "empty line");
  if (x < 0.68 && socket) {
    const m = { type: "daemon.control", request_id: rid, command: { action: pick(r, ["status", "reload", "delegations", "confirm_status", "nope", "__proto__", ""]), all: pick(r, ODD), id: pick(r, ODD) } };
    return text(serialize(m), "any", "daemon.control");
  }
  // A text-level mutation of a valid or broken request.
  const base = genCase(r, i, sid, socket);
  const s = base.bytes.toString("utf8");
  return text(mutateText(r, s.length > 5000 ? s.slice(0, 5000) : s), "any", `mutated ${base.what}`);
}

/** The cases at the limits, once per connection. */
function limitCases(i: number, sid: string): Case[] {
  const cancel = (rid: string): Msg => ({ type: "turn.cancel", request_id: rid, session_id: sid, turn_id: "~no-turn" });
  const update = (rid: string, bytes: number): string => JSON.stringify({ type: "queue.update", request_id: rid, session_id: sid, queue_id: "~no-entry", revision: 1, prompt: promptOf(bytes) });
  return [
    text(sized(MAX_CLIENT_FRAME_BYTES, cancel(`at${i}`)), err("turn_not_found", "no running turn with this ID", `at${i}`), "frame at 1 MiB"),
    text(sized(MAX_CLIENT_FRAME_BYTES + 1, cancel(`over${i}`)), err("invalid_request", MESSAGES.frameTooLarge), "frame one past 1 MiB"),
    text(update(`pat${i}`, MAX_PROMPT_BYTES), err("queue_not_found", "no queued entry with this ID", `pat${i}`), "queue.update prompt at 256 KiB"),
    text(update(`pover${i}`, MAX_PROMPT_BYTES + 1), err("invalid_request", MESSAGES.promptTooLarge, `pover${i}`), "queue.update prompt one past 256 KiB"),
    text(JSON.stringify({ type: "turn.start", request_id: `tover${i}`, session_id: sid, prompt: promptOf(MAX_PROMPT_BYTES + 1) }), err("invalid_request", MESSAGES.promptTooLarge, `tover${i}`), "turn.start prompt one past 256 KiB"),
  ];
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** No lone surrogate in what the server wrote (a `request_id` is the client's own value, echoed as sent). */
function wellFormed(v: unknown): boolean {
  if (typeof v === "string") return !LONE_SURROGATE.test(v);
  if (Array.isArray(v)) return v.every(wellFormed);
  if (v !== null && typeof v === "object") return Object.entries(v).every(([k, e]) => k === "request_id" || (!LONE_SURROGATE.test(k) && wellFormed(e)));
  return true;
}

async function writeChunked(r: Rand, out: Writable, data: Buffer): Promise<void> {
  let off = 0;
  while (off < data.length) {
    const n = 1 + Math.floor(r() * (r() < 0.1 ? 200_000 : 5000));
    if (!out.write(data.subarray(off, off + n))) await new Promise<void>((resolve) => out.once("drain", resolve));
    off += n;
  }
}

/** Runs `count` cases (plus the limit cases) on one open connection, then the end-of-connection checks. */
async function fuzzConnection(r: Rand, c: ScvClient, out: Writable, count: number, base: number, socket: boolean, rig: Rig): Promise<void> {
  const opened = await c.open({ no_tools: r() < 0.5 });
  const sid = opened.session_id as string;
  const cases: Case[] = [...limitCases(base, sid)];
  for (let k = 0; k < count; k++) cases.splice(Math.floor(r() * (cases.length + 1)), 0, genCase(r, base + k, sid, socket));
  const parts: Buffer[] = [];
  for (const [k, cs] of cases.entries()) {
    const eol = r() < 0.3 ? "\r\n" : "\n";
    parts.push(cs.bytes, Buffer.from(eol));
    parts.push(Buffer.from(JSON.stringify({ type: "turn.cancel", request_id: `~mk${k}`, session_id: sid, turn_id: "~marker" }) + eol));
  }
  const from = c.frames.length;
  await writeChunked(r, out, Buffer.concat(parts));
  const last = await c.waitFor((m) => m.request_id === `~mk${cases.length - 1}`, from, "the last marker");
  assert.equal(last.code, "turn_not_found", `seed ${SEED}: marker answered ${JSON.stringify(last)}`);

  // Correlate: the errors between two markers answer one case.
  let k = 0;
  let errors: Msg[] = [];
  for (const f of c.frames.slice(from)) {
    if (f.type !== "error") continue;
    if (f.request_id === `~mk${k}`) {
      const cs = cases[k]!;
      const where = `seed ${SEED}, connection ${base}, case ${k} (${cs.what})`;
      if (cs.expect === "none") assert.deepEqual(errors, [], `${where}: expected no error`);
      else if (cs.expect === "any") assert.ok(errors.length <= 1, `${where}: more than one error: ${JSON.stringify(errors)}`);
      else {
        assert.equal(errors.length, 1, `${where}: expected one error, got ${JSON.stringify(errors).slice(0, 500)}`);
        const e = errors[0]!;
        assert.deepEqual(
          { code: e.code, message: e.message, rid: e.request_id ?? null, fatal: e.fatal },
          { ...cs.expect, fatal: false },
          `${where}: wrong error`,
        );
        if (cs.expect.rid === null) assert.ok(!("request_id" in e), `${where}: request_id must be omitted`);
      }
      for (const e of errors) {
        assert.ok(ALLOWED_CODES.has(e.code as string), `${where}: unexpected code ${String(e.code)}`);
        assert.equal(e.fatal, false, `${where}: fatal error`);
        assert.ok(typeof e.message === "string" && e.message.length > 0 && e.message.length <= 300, `${where}: message ${JSON.stringify(e.message)?.slice(0, 400)}`);
      }
      errors = [];
      k++;
      continue;
    }
    errors.push(f);
  }
  assert.equal(k, cases.length, `seed ${SEED}: every marker answered in order`);

  // The session still works: unpause and run a final turn. Every other connection closes its input right after
  // sending it (EOF with a turn running or queued): each started turn must still end exactly once, on the wire and
  // in the session file.
  const pid = c.request({ type: "session.pause", session_id: sid, paused: false });
  await c.reply(pid, ["session.paused"]);
  const eofEarly = (base / PER_CONN) % 2 === 1;
  let fin: Msg | null = null;
  if (eofEarly) {
    c.request({ type: "turn.start", session_id: sid, prompt: `final ${base}` });
    c.end();
  } else {
    fin = (await c.turn(sid, `final ${base}`)).terminal;
    if (fin.type === "error") assert.equal(fin.code, "queue_limit", `seed ${SEED}: final turn refused: ${JSON.stringify(fin)}`);
    else assert.equal(fin.type, "turn.completed", `seed ${SEED}: final turn: ${JSON.stringify(fin)}`);
    const startedTurns = c.frames.filter((f) => f.session_id === sid && f.type === "turn.started").map((f) => f.turn_id as string);
    await c.waitFor(() => {
      const ended = new Set(c.frames.filter((f) => f.session_id === sid && /^turn\.(completed|cancelled|failed)$/.test(f.type as string)).map((f) => f.turn_id));
      return startedTurns.every((t) => ended.has(t));
    }, from, "every started turn to end");
    c.end();
  }
  await c.closed;
  const started = c.frames.filter((f) => f.session_id === sid && f.type === "turn.started").map((f) => f.turn_id as string);
  const terminals = c.frames.filter((f) => f.session_id === sid && /^turn\.(completed|cancelled|failed)$/.test(f.type as string));
  assert.equal(new Set(terminals.map((f) => f.turn_id)).size, terminals.length, `seed ${SEED}: a turn ended twice`);
  assert.deepEqual(new Set(terminals.map((f) => f.turn_id)), new Set(started), `seed ${SEED}: every started turn ended once (eof early: ${eofEarly})`);
  for (const f of terminals) if (f.type === "turn.failed") assert.notEqual(f.code, "internal_error", `seed ${SEED}: ${JSON.stringify(f)}`);

  // Nothing durable lost: every started turn has its prompt and a terminal record in the session file.
  const file = readdirSync(join(rig.home, "sessions")).find((n) => n.startsWith(sid) && n.endsWith(".jsonl"));
  assert.ok(file !== undefined, `seed ${SEED}: the session file exists`);
  const users = new Map<string, string>();
  const ends = new Set<string>();
  for (const line of readFileSync(join(rig.home, "sessions", file), "utf8").split("\n")) {
    if (line.includes('"kind":"user"')) {
      const u = JSON.parse(line) as { turn_id: string; text: string };
      users.set(u.turn_id, u.text);
    } else if (line.includes('"kind":"terminal"')) ends.add((JSON.parse(line) as { turn_id: string }).turn_id);
  }
  for (const t of started) {
    assert.ok(users.has(t), `seed ${SEED}: started turn ${t} has no user record in the session file`);
    assert.ok(ends.has(t), `seed ${SEED}: started turn ${t} has no terminal record in the session file`);
  }
  if (fin !== null && fin.type === "turn.completed") assert.equal(users.get(fin.turn_id as string), `final ${base}`);

  assert.deepEqual(c.garbage, [], `seed ${SEED}: output lines that are not JSON objects`);
  assert.deepEqual(c.seqErrors, [], `seed ${SEED}: seq gaps`);
  for (const f of c.frames) assert.ok(wellFormed(f), `seed ${SEED}: a frame with a lone surrogate: ${JSON.stringify(f).slice(0, 300)}`);
}

describe("scv fuzz", () => {
  it("berth stdio: every malformed line gets its fixed error and the session goes on", { timeout: 600_000 }, async () => {
    const rig = await startRig();
    const r = prng(SEED);
    try {
      for (let n = 0; n < COUNT; n += PER_CONN) {
        const s = spawnStdio(rig.env);
        try {
          await fuzzConnection(r, s.client, s.child.stdin, Math.min(PER_CONN, COUNT - n), n, false, rig);
          assert.equal(await s.exited, 0, `seed ${SEED}: berth stdio exit code; stderr ${s.client.stderr().slice(-500)}`);
        } finally {
          if (s.child.exitCode === null) s.child.kill("SIGKILL");
        }
      }
    } finally {
      await rig.fake.close();
    }
  });

  it("daemon socket: every malformed line gets its fixed error and the daemon keeps serving", { timeout: 600_000 }, async () => {
    const rig = await startRig();
    const d = await startDaemon(rig.env);
    const r = prng(SEED ^ 0x9e3779b9);
    try {
      for (let n = 0; n < COUNT; n += PER_CONN) {
        const s: Socket = connect(d.socket);
        await new Promise<void>((resolve, reject) => {
          s.once("connect", resolve);
          s.once("error", reject);
        });
        const c = new ScvClient(s, s, () => d.stderr());
        try {
          await fuzzConnection(r, c, s, Math.min(PER_CONN, COUNT - n), n, true, rig);
        } finally {
          s.destroy();
        }
      }
      const c = await d.connect();
      await c.initialize();
      const id = c.request({ type: "daemon.control", command: { action: "status" } });
      assert.equal((await c.reply(id, ["daemon.status"])).type, "daemon.status", `seed ${SEED}: the daemon still answers`);
      c.end();
      await c.closed;
      assert.doesNotMatch(d.stderr(), /internal error|TypeError|RangeError|unhandled/i, `seed ${SEED}: daemon stderr`);
    } finally {
      await d.stop();
      await rig.fake.close();
    }
  });
});

describe("scv fuzz findings", () => {
  it("finding: an unknown type is echoed cut on a character boundary, never as a lone surrogate", () => {
    for (const type of ["a" + "😀".repeat(40), "\ud800x", "é".repeat(70), "x\u0000y"]) {
      const d = decodeMessage(JSON.stringify({ type, request_id: "r" }), { initialized: true });
      assert.equal(d.ok, false);
      const e = (d as { error: { code: string; message: string; request_id: string } }).error;
      assert.equal(e.code, "invalid_json");
      assert.equal(e.request_id, "r");
      assert.ok(wellFormed(e.message), `lone surrogate in ${JSON.stringify(e.message)}`);
      assert.doesNotMatch(e.message, /[\u0000-\u001f]/);
      assert.ok(Buffer.byteLength(e.message) <= "unknown message type ``".length + 64);
      assert.ok(e.message.startsWith("unknown message type `"));
    }
  });
});
