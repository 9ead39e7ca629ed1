/**
 * `berth chat`'s command line as a new user types it: the flags of other terminal agents (`--resume`, `-r`,
 * `resume`, `--model`, `--print`, `--dangerously-skip-permissions`, `--output-format`) point at Berth's way; a
 * mistyped flag names the nearest known one; a prompt given without `-p`, or in several unquoted words, says how to
 * quote it; every refusal says where `--help` is, in one line, exit 2, nothing on stdout and no session started.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv } from "./helpers.js";

function run(args: string[], input = ""): { status: number | null; stdout: string; stderr: string; home: string } {
  const home = join(mkdtempSync(join(tmpdir(), "berth-args-")), "home");
  const r = spawnSync(process.execPath, [BERTH_BIN, "chat", ...args], { input, encoding: "utf8", env: chatEnv(home) });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, home };
}

/** A refused command line: exit 2, one stderr line ending with where the options are, no state written. */
function refused(args: string[], expected: RegExp): string {
  const r = run(args);
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stdout, "");
  const lines = r.stderr.split("\n").filter((l) => l !== "");
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0]!, /^berth chat: /);
  assert.match(lines[0]!, /; berth chat --help lists the options$/);
  assert.match(lines[0]!, expected);
  assert.doesNotMatch(r.stderr, /\n\s+at |Error:/);
  assert.equal(existsSync(r.home), false, "a refused command line started nothing");
  return lines[0]!;
}

describe("berth chat arguments", () => {
  it("--resume, -r, resume and --resume=ID point at --session <id> and --continue", () => {
    const way = /continue a saved session with --session <id> \(a full ID or a unique prefix; \/sessions in the chat lists them\), or the latest one in this directory with --continue/;
    for (const args of [["--resume"], ["-r"], ["resume"], ["--resume", "s000abc"], ["--resume=s000abc"], ["-p", "hi", "--resume"]]) {
      const line = refused(args, way);
      assert.match(line, new RegExp(`^berth chat: '${args.find((a) => a.includes("r") && a !== "hi")!.replace(/=.*/, "").replace(/-/g, "\\-")}' is not a berth chat option`));
    }
  });

  it("a mistyped flag names the nearest known one (transpositions count once); a far one names none", () => {
    for (const [typed, near] of [
      ["--contnue", "--continue"],
      ["--sesion", "--session"],
      ["--yolo2", "--yolo"],
      ["--jsno", "--json"],
      ["--promt=hi", "--prompt"],
      ["--hlep", "--help"],
      ["--verison", "--version"],
      ["-continue", "--continue"],
    ] as const)
      refused([typed], new RegExp(`^berth chat: unknown option '${typed.replace(/[=-]/g, "\\$&")}' \\(did you mean ${near}\\?\\); `));
    refused(["--frobnicate"], /^berth chat: unknown option '--frobnicate'; berth chat --help/);
    refused(["-x"], /^berth chat: unknown option '-x'; berth chat --help/);
  });

  it("the flags of other agents name Berth's way: --model, --print, --dangerously-skip-permissions, --output-format", () => {
    refused(["--model", "gpt-5"], /^berth chat: '--model' is not a berth chat option: choose the model with MC_MODEL=<model> \(and MC_PROVIDER=<provider>\) or \/model in the chat/);
    refused(["-m", "gpt-5", "-p", "hi"], /^berth chat: '-m' is not a berth chat option: choose the model with MC_MODEL=/);
    refused(["--print", "hi"], /^berth chat: '--print' is not a berth chat option: run one turn with -p PROMPT \(--prompt PROMPT\)/);
    refused(["--dangerously-skip-permissions"], /^berth chat: '--dangerously-skip-permissions' is not a berth chat option: --yolo approves every tool call without asking/);
    refused(["-p", "hi", "--output-format", "stream-json"], /^berth chat: '--output-format' is not a berth chat option: -p PROMPT --json prints the turn's events as JSON lines/);
  });

  it("a prompt without -p, or in several unquoted words, says how to give it", () => {
    refused(["fix the bug"], /^berth chat: 'fix the bug' is not an option: berth chat takes a prompt with -p \("berth chat -p 'fix the bug'"\); without -p, start it and type the prompt/);
    refused(["-p", "fix", "the", "bug"], /^berth chat: -p takes one argument, and 'the' followed it: quote a prompt of several words \("berth chat -p 'fix the bug'"\)/);
    refused(["-p", "one", "-p", "two"], /^berth chat: -p was given twice: give one prompt \(quote it when it has several words\)/);
    // Never a whole pasted prompt (or a pasted key) echoed: the quoted part is cut.
    const long = refused([`${"x".repeat(300)}`], /is not an option/);
    assert.ok(long.length < 400, long);
  });

  it("an empty prompt says how to give one (exit 2)", () => {
    for (const [args, input, why] of [
      [["-p", ""], "", /^berth chat: the prompt is empty: give it after -p \(berth chat -p "what to do"\), or pipe it in with -p -\n$/],
      [["-p", "   "], "", /^berth chat: the prompt is empty: give it after -p/],
      [["-p", "-"], "", /^berth chat: the prompt is empty \(stdin had no text\): pipe the prompt in \(echo "what to do" \| berth chat -p -\), or give it after -p\n$/],
    ] as const) {
      const r = run([...args], input);
      assert.equal(r.status, 2, r.stderr);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, why);
    }
  });

  it("--help anywhere on the line wins over a refusal", () => {
    for (const args of [["--bogus", "--help"], ["--resume", "-h"], ["-p", "a", "-p", "b", "--help"], ["--json", "--help"]]) {
      const r = run(args);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^usage: berth chat /);
      assert.equal(r.stderr, "");
    }
  });

  it("--help and --version into a pipe already closed end quietly (no EPIPE trace), for berth and berth chat", () => {
    for (const args of [["chat", "--help"], ["chat", "-h"], ["chat", "--version"], ["--help"], ["--version"], ["chat", "--yolo", "--help"]]) {
      const line = args.map((a) => JSON.stringify(a)).join(" ");
      const dir = mkdtempSync(join(tmpdir(), "berth-args-"));
      const gate = join(dir, "gate");
      // The reader closes its end, then lets berth start (through a FIFO): every write to stdout meets EPIPE.
      const script = `set -o pipefail; mkfifo ${JSON.stringify(gate)}; { read -r _ < ${JSON.stringify(gate)}; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(BERTH_BIN)} ${line}; } | { exec 0<&-; echo > ${JSON.stringify(gate)}; }`;
      const r = spawnSync("bash", ["-c", script], { encoding: "utf8", env: chatEnv(join(dir, "home")) });
      assert.doesNotMatch(r.stdout + r.stderr, /EPIPE|\n\s+at |Error/, `${line}: ${r.stdout}${r.stderr}`);
      assert.equal(r.status, 0, `${line}: ${r.stdout}${r.stderr}`);
    }
  });
});
