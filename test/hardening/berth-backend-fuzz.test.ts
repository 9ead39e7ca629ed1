/**
 * Seeded fuzzer for the in-process Berth backend's own frame handling (src/backends/berth/): a fake host on a Unix
 * socket registers the backend and a pool of sessions, then sends mutated host frames (session and provider commands
 * of every type, registrations, errors, event refusals, unknown frames; value swaps, dropped keys, deep nesting,
 * text-level edits). The host's wire validation is bypassed on purpose: the backend must hold on its own.
 * Interleaved with them, the host's side of re-registration (`berth-fuzz-registrar.ts`): refusals of the pool's
 * events naming each session's current epoch (which re-registers it), a stale, an unknown or no epoch; answers to
 * those re-registrations at once, batches later or refused; and disposals of pool sessions, mostly of one whose
 * re-registration awaits its answer, so answers race disposals. The pool is refilled as sessions are disposed.
 * Afterwards: every command frame with a string `commandId` got exactly one `command_result` (accepted a boolean),
 * `sequenced_event` numbers rise by one per registration, a registration answered after its session's disposal was
 * unregistered and no other, nothing registered or published a session after its disposal, nothing was logged as a
 * bug, no rejection went unhandled, and a fresh session still runs a prompt to its reply. `FUZZ_SEED` /
 * `FUZZ_COUNT` reproduce or lengthen a run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { prng } from "../helpers/prng.js";
import { mutator, pick } from "../helpers/mutate.js";
import { until, type Json } from "../host/helpers.js";
import { withBackend } from "./berth-fake-host.js";
import { Registrar } from "./berth-fuzz-registrar.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261204);
const COUNT = Number(process.env.FUZZ_COUNT ?? 600);

const { mutateText } = mutator({ extraKeys: ["extra", "type", "session", "chat", "command", "commandId"], textEditRate: 0.1, keep: (k, r) => k === "commandId" && r() < 0.9 });

test("Berth backend frame fuzz: every command answered once, no bug logged, the backend still runs prompts", { timeout: 300_000 }, async () => {
  const r = prng(SEED);
  await withBackend(async ({ host, rt, results, session, logs }) => {
    const reg = new Registrar(host);
    let made = 0;
    const refill = async (): Promise<void> => {
      while (reg.live().length < 3) reg.add(await session(`fz${made++}`));
    };
    await refill();
    const commands = (k: number): Json[] => {
      const s = pick(r, reg.pool);
      const epoch = r() < 0.9 ? s.epochs.at(-1) : pick(r, s.epochs);
      const c = (command: Json, extra: Json = {}): Json => ({ type: "command", commandId: `k${k}`, backendInstanceId: rt.instanceId, session: s.uri, backendConnectionId: epoch, command, ...extra });
      const p = (command: Json): Json => ({ type: "provider_command", commandId: `k${k}`, backendInstanceId: rt.instanceId, command });
      return [
        c({ type: "prompt", text: `hi ${k}`, turnId: `t${k}` }),
        c({ type: "abort" }),
        c({ type: "steer", text: "s", id: `p${k}` }),
        c({ type: "steer", message: { text: "s" }, id: `p${k}` }),
        c({ type: "configure", model: { provider: "fake", id: "fake-model" }, thinkingLevel: "high" }),
        c({ type: "confirm_tool", toolCallId: "tc", approved: true }),
        c({ type: "complete_input", requestId: "q", response: "accept", answers: { answer: { state: "submitted", value: { kind: "text", value: "v" } } } }),
        c({ type: "follow_up", text: `f ${k}`, id: `p${k}` }),
        c({ type: "create_chat", chat: `ahp-chat:/x${k % 5}`, title: "T", initialText: "i", initialTurnId: `it${k}` }),
        c({ type: "create_chat", chat: `ahp-chat:/f${k}`, source: { kind: "fork", chat: s.chat, turnId: `t${k - 1}` } }),
        c({ type: "dispose_chat", chat: `ahp-chat:/x${k % 5}` }),
        c({ type: "fetch_turns", cursor: pick(r, ["", "0", "zz", "t1"]) }),
        c({ type: "prompt", text: "chat" }, { chat: `ahp-chat:/x${k % 5}` }),
        c({ type: "nope" }),
        p({ type: "create_session", session: `ahp-session:/p${k}`, creationToken: "t", workingDirectories: pick(r, [["file:///nonexistent-dir"], [5], ["file://evil/x"], [], "x"]) }),
        p({ type: "dispose_session", session: `ahp-session:/p${k}` }),
        p({ type: "nope" }),
      ];
    };
    const s = reg.pool[0]!;
    const others = (k: number): Json[] => [
      { type: "session_registered", requestId: `nope${k}`, session: 5, backendConnectionId: null },
      { type: "error", requestId: `nope${k}`, code: "x", fatal: false },
      { type: "event_rejected", session: pick(r, [s.uri, "x", 5]), error: "e".repeat(300) },
      { type: "event_ack", session: s.uri, sequence: k },
      { type: "pong", id: `sync-${k}` },
      { type: "provider_registered" },
      { type: "session_unregistered", session: s.uri },
      { type: "x".repeat(100) },
    ];
    // How many times each commandId was sent (a text mutation can turn one ID into another: "k2610" → "k261").
    const sentIds = new Map<string, number>();
    const batch = 20;
    /** Write `lines` in order, recording each frame; a line the framing would refuse is left out. */
    const write = (lines: string[]): void => {
      for (const line of lines) {
        let pf: Json | undefined;
        try {
          const v: unknown = JSON.parse(line);
          // A line the framing refuses ends the connection (the backend reconnects): keep frames parseable as JSON.
          if (v === null || typeof v !== "object" || Array.isArray(v)) continue;
          pf = v;
        } catch {
          continue; // not a frame the host could send
        }
        // A command frame the backend must answer: a command with a string commandId.
        if ((pf.type === "command" || pf.type === "provider_command") && typeof pf.commandId === "string") sentIds.set(pf.commandId, (sentIds.get(pf.commandId) ?? 0) + 1);
        reg.wrote(pf);
        host.raw(line);
        if (process.env.FUZZ_VERBOSE) process.stderr.write(`>> ${line.slice(0, 300)}\n`);
      }
    };
    for (let n = 0; n < COUNT; n += batch) {
      await refill();
      const lines: string[] = [];
      for (let k = n; k < Math.min(COUNT, n + batch); k++) {
        const x = r();
        const f = x < 0.7 ? pick(r, commands(k)) : x < 0.85 ? pick(r, others(k)) : x < 0.96 ? reg.refusal(r, k) : reg.dispose(r, rt.instanceId);
        // A disposal of a pool session goes unmutated: the checks must know which session it disposed.
        if (f !== undefined) lines.push(r() < 0.5 && x < 0.96 ? mutateText(r, f) : JSON.stringify(f));
      }
      // The answers to the re-registrations written so far go in among them, before or after a disposal.
      for (const a of reg.answers(r)) lines.splice(Math.floor(r() * (lines.length + 1)), 0, a);
      write(lines);
      await until(() => [...sentIds].every(([id, n]) => results(id).length >= n), 20_000, `seed ${SEED}: every command up to ${n + batch} answered`).catch((e: unknown) => {
        const missing = [...sentIds].filter(([id, n]) => results(id).length < n).map(([id]) => id);
        throw new Error(`${String(e)}: missing ${missing.slice(0, 5).join(", ")}; connections ${host.connections}; log ${logs.slice(-5).join(" | ")}`);
      });
    }
    // Every re-registration answered (they may keep coming while refusals of current epochs are being read).
    for (;;) {
      await rt.sync();
      await rt.registrationsSent();
      await rt.sync();
      const lines = reg.answers(r, true);
      if (lines.length === 0) break;
      write(lines);
    }
    assert.equal(host.connections, 1, `seed ${SEED}: the connection stayed (every frame was parseable)`);
    const covered = reg.check(SEED, results);
    assert.ok(reg.reRegistrations > 0 && covered.disposed > 0 && covered.unregistered > 0, `seed ${SEED}: the fuzz reached re-registration, disposal and their race: ${JSON.stringify({ reRegistrations: reg.reRegistrations, ...covered })}`);
    if (process.env.FUZZ_VERBOSE) process.stderr.write(`covered: ${JSON.stringify({ reRegistrations: reg.reRegistrations, ...covered })}\n`);
    for (const [id, n] of sentIds) {
      const rs = results(id);
      // Each delivery is answered once; a repeated ID gets the first result again (executed at most once) while the
      // backend still remembers it: it keeps the last MAX_REMEMBERED_RESULTS (4,096) answered IDs.
      assert.equal(rs.length, n, `seed ${SEED}: ${id} sent ${n} times, answered ${rs.length} times: ${JSON.stringify(rs)}`);
      assert.equal(typeof rs[0]!.accepted, "boolean");
      const first = host.answeredBefore.get(rs[0]!)!;
      for (const x of rs) if (host.answeredBefore.get(x)! - first < 4096) assert.deepEqual(x, rs[0], `seed ${SEED}: ${id}: a repeated ID got another result`);
    }
    for (const f of host.frames) if (f.type === "command_result") assert.equal(typeof f.commandId, "string", `seed ${SEED}: ${JSON.stringify(f).slice(0, 200)}`);
    const seqs = new Map<string, number>();
    for (const f of host.frames) {
      if (f.type !== "sequenced_event") continue;
      const key = `${String(f.session)}|${String(f.backendConnectionId)}`;
      const prev = seqs.get(key) ?? 0;
      assert.equal(f.sequence, prev + 1, `seed ${SEED}: sequence of ${key}`);
      seqs.set(key, f.sequence);
    }

    // Still serving: a fresh session runs a prompt to its reply.
    const fresh = await session("after");
    const from = host.frames.length;
    host.send({ type: "command", commandId: "final", backendInstanceId: rt.instanceId, session: fresh.uri, backendConnectionId: fresh.logical, command: { type: "prompt", text: "still there", turnId: "tf" } });
    await until(() => host.frames.slice(from).some((f) => f.type === "sequenced_event" && f.session === fresh.uri && (f.event as Json).type === "settled"), 20_000, "the final turn settles");
    assert.equal(results("final")[0]?.accepted, true);
    const text = host.frames
      .slice(from)
      .filter((f) => f.type === "sequenced_event" && f.session === fresh.uri && (f.event as Json).type === "text_delta")
      .map((f) => (f.event as Json).text)
      .join("");
    assert.equal(text, "echo: still there");
  }, `seed ${SEED}`);
});

test("finding: a command with a string commandId but no command object was never answered", () =>
  withBackend(async ({ host, rt, results, session }) => {
    const s = await session("m");
    const bad: unknown[] = [undefined, "", [], { type: 5 }, null];
    bad.forEach((command, i) =>
      host.send({ type: "command", commandId: `bad${i}`, backendInstanceId: rt.instanceId, session: s.uri, backendConnectionId: s.logical, ...(command === undefined ? {} : { command }) }),
    );
    host.send({ type: "provider_command", commandId: "badp", backendInstanceId: rt.instanceId, command: "create_session" });
    await until(() => [...bad.keys()].every((i) => results(`bad${i}`).length > 0) && results("badp").length > 0, 10_000, "every malformed command answered");
    for (const id of [...bad.keys()].map((i) => `bad${i}`).concat("badp")) assert.deepEqual(results(id), [{ type: "command_result", commandId: id, accepted: false, error: "the command must be an object with a string type" }]);
  }));

test("finding: two prompts admitted at once on one chat threw 'held is not iterable'; both are answered before their events", () =>
  withBackend(async ({ host, rt, results, session }) => {
    const s = await session("two");
    const from = host.frames.length;
    const cmd = (id: string, text: string, turnId: string) => ({ type: "command", commandId: id, backendInstanceId: rt.instanceId, session: s.uri, backendConnectionId: s.logical, command: { type: "prompt", text, turnId } });
    // One write: both frames are handled in the same tick, so the second admission starts before the first ends.
    host.raw(`${JSON.stringify(cmd("p1", "first", "T1"))}\n${JSON.stringify(cmd("p2", "second", "T2"))}`);
    await until(() => results("p1").length > 0 && results("p2").length > 0, 10_000, "both prompts answered");
    await until(() => host.frames.slice(from).some((f) => f.type === "sequenced_event" && (f.event as Json).type === "settled"), 15_000, "the admitted turn settles");
    const accepted = ["p1", "p2"].filter((id) => results(id)[0]!.accepted === true);
    assert.equal(accepted.length, 1, `exactly one prompt runs: ${JSON.stringify([results("p1"), results("p2")])}`);
    const refused = ["p1", "p2"].find((id) => !accepted.includes(id))!;
    assert.equal(results(refused)[0]!.error, "a turn is already running");
    const frames = host.frames.slice(from);
    const firstEvent = frames.findIndex((f) => f.type === "sequenced_event");
    const lastResult = Math.max(...["p1", "p2"].map((id) => frames.findIndex((f) => f.type === "command_result" && f.commandId === id)));
    assert.ok(firstEvent > lastResult, "the turn's events follow the command results");
    const user = frames.find((f) => f.type === "sequenced_event" && (f.event as Json).type === "user_message")!;
    assert.equal((user.event as Json).turnId, accepted[0] === "p1" ? "T1" : "T2");
  }));
