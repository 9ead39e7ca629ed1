/**
 * tool.progress shaping (src/protocols/scv/progress.ts) with an injected clock: single lines of at most 200 bytes,
 * credentials replaced by `…`, at most one event per 500 ms joining the lines since the last one, at most 512 bytes
 * with a leading `…` line when older lines were dropped, nothing after completion.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { utf8Length } from "../../src/core/utf8.js";
import { joinProgress, ProgressShaper, progressLine, type ProgressTimers } from "../../src/protocols/scv/progress.js";

class FakeClock implements ProgressTimers {
  t = 0;
  private timers: Array<{ at: number; f: () => void; id: number }> = [];
  private n = 0;
  now(): number {
    return this.t;
  }
  setTimeout(f: () => void, ms: number): unknown {
    const id = ++this.n;
    this.timers.push({ at: this.t + ms, f, id });
    return id;
  }
  clearTimeout(id: unknown): void {
    this.timers = this.timers.filter((x) => x.id !== id);
  }
  advance(ms: number): void {
    this.t += ms;
    const due = this.timers.filter((x) => x.at <= this.t);
    this.timers = this.timers.filter((x) => x.at > this.t);
    for (const x of due) x.f();
  }
}

it("makes single redacted lines of at most 200 bytes", () => {
  assert.equal(progressLine("a\nb\r\nc"), "a b c");
  assert.equal(progressLine("curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz'"), "curl -H 'Authorization: Bearer …'");
  assert.ok(!progressLine("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345").includes("abcdefghijkl"));
  assert.equal(utf8Length(progressLine("x".repeat(200))), 200);
  assert.equal(utf8Length(progressLine("é".repeat(150))), 200);
  assert.ok(utf8Length(progressLine("x".repeat(201))) <= 200);
  // at the bound a line is kept whole; one byte past it is cut to exactly the bound, on a character boundary
  assert.equal(progressLine("x".repeat(201)), "x".repeat(200));
  assert.equal(progressLine("x" + "é".repeat(100)), "x" + "é".repeat(99));
});

it("keeps an event of exactly 512 bytes whole and cuts one of 513 behind a leading … line", () => {
  // five lines of 100 bytes, each with its newline (505 bytes), and a last line sized to reach 512, then 513
  const head = Array.from({ length: 5 }, (_, i) => `${i}`.padEnd(100, "."));
  const at = [...head, "z".repeat(512 - 5 * 101)];
  assert.equal(utf8Length(at.join("\n")), 512);
  assert.equal(joinProgress(at), at.join("\n"));
  const past = [...head, "z".repeat(513 - 5 * 101)];
  const text = joinProgress(past);
  assert.ok(utf8Length(text) <= 512);
  assert.equal(text, ["…", ...past.slice(1)].join("\n"));
});

it("keeps an event within 512 bytes, newest lines behind a leading … line", () => {
  const lines = Array.from({ length: 10 }, (_, i) => `${i}`.padEnd(100, "."));
  const text = joinProgress(lines);
  assert.ok(utf8Length(text) <= 512);
  assert.ok(text.startsWith("…\n"));
  assert.ok(text.endsWith(lines[9]!));
  assert.equal(joinProgress(["a", "b"]), "a\nb");
});

it("emits at most one event per 500 ms, joining what came in between; nothing after completion", () => {
  const clock = new FakeClock();
  const out: string[] = [];
  const p = new ProgressShaper((_id, text) => out.push(text), clock);
  p.line("c1", "first");
  assert.deepEqual(out, ["first"]);
  clock.advance(100);
  p.line("c1", "second");
  clock.advance(100);
  p.line("c1", "third");
  assert.deepEqual(out, ["first"]);
  clock.advance(299);
  assert.deepEqual(out, ["first"]);
  clock.advance(1);
  assert.deepEqual(out, ["first", "second\nthird"]);
  clock.advance(100);
  p.line("c1", "late");
  p.complete("c1");
  clock.advance(1000);
  assert.deepEqual(out, ["first", "second\nthird"]);
  p.line("c2", "other call");
  assert.deepEqual(out.at(-1), "other call");
});
