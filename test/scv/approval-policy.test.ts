/**
 * `approval_policy` across settings layers, over `berth stdio` launched in a project directory: the project's
 * `.berth/settings.json` (which a cloned repository can ship) may make approvals stricter, never looser. A project
 * saying "never" still gets asked before bash, and the server says on stderr why its value was not applied; a
 * project saying "always" asks even before a read-only tool; the global "never" is honoured. A value that is not one
 * of the three fails the turn naming the setting, not its value (it was silently ignored).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnStdio, startRig, type Msg, type Rig, type ScvClient } from "./client.js";

let rig: Rig;
let globalSettings: string;

before(async () => {
  rig = await startRig();
  globalSettings = readFileSync(join(rig.home, "settings.json"), "utf8");
});
after(async () => {
  await rig.fake.close();
});

/** A project directory whose `.berth/settings.json` holds `project` (none when null); the global layer gets `global`. */
function layers(project: Record<string, unknown> | null, global: Record<string, unknown> = {}): string {
  writeFileSync(join(rig.home, "settings.json"), JSON.stringify({ ...(JSON.parse(globalSettings) as object), ...global }));
  const dir = mkdtempSync(join(tmpdir(), "scv-project-"));
  if (project !== null) {
    mkdirSync(join(dir, ".berth"), { mode: 0o700 });
    writeFileSync(join(dir, ".berth", "settings.json"), JSON.stringify(project), { mode: 0o600 });
  }
  return dir;
}

/**
 * Runs one turn calling `tool` in a `berth stdio` launched in `dir`, its session working in `sessionDir` (`dir` by
 * default); what the client saw and the server's stderr.
 */
async function toolTurn(dir: string, tool: string, args: Record<string, unknown>, sessionDir = dir): Promise<{ asked: Msg | null; terminal: Msg; stderr: string }> {
  const { client: c, exited } = spawnStdio(rig.env, dir);
  try {
    await c.initialize();
    const s = await c.open({}, sessionDir);
    rig.fake.script([{ steps: [{ toolCall: { id: `call_${tool}`, name: tool, arguments: args } }] }]);
    const from = c.frames.length;
    const rid = c.request({ type: "turn.start", session_id: s.session_id, prompt: "go" });
    const first = await c.waitFor((m) => m.request_id === rid && (m.type === "approval.requested" || /^turn\.(completed|failed|cancelled)$/.test(m.type as string)), from);
    let asked: Msg | null = null;
    if (first.type === "approval.requested") {
      asked = first;
      c.request({ type: "approval.resolve", session_id: s.session_id, approval_id: first.approval_id, approved: false });
    }
    const terminal = await c.waitFor((m) => m.request_id === rid && /^turn\.(completed|failed|cancelled)$/.test(m.type as string), from);
    return { asked, terminal, stderr: stderrOf(c) };
  } finally {
    c.end();
    await exited;
    rmSync(dir, { recursive: true, force: true });
    rmSync(sessionDir, { recursive: true, force: true });
  }
}

const stderrOf = (c: ScvClient): string => c.stderr();

describe("approval_policy layers over berth stdio", () => {
  it('a project\'s "never" does not loosen the default: bash still asks, and stderr says why', async () => {
    const r = await toolTurn(layers({ approval_policy: "never" }), "bash", { command: "echo from-the-repo" });
    assert.ok(r.asked !== null, "bash was run without asking");
    assert.equal(r.asked.risk, "process");
    assert.match(r.stderr, /ignoring approval_policy "never" in this directory's \.berth\/settings\.json: a project's settings may only make approvals stricter \(using "on-risk"\)/);
    assert.equal(r.stderr.match(/ignoring approval_policy/g)?.length, 1, "said once");
  });

  it('a project\'s "on-risk" does not loosen a global "always" either', async () => {
    const r = await toolTurn(layers({ approval_policy: "on-risk" }, { approval_policy: "always" }), "ls", {});
    assert.ok(r.asked !== null, "ls ran without asking under the global always");
    assert.match(r.stderr, /ignoring approval_policy "on-risk" .*\(using "always"\)/);
  });

  it('a project\'s "always" makes it stricter: even a read-only tool asks', async () => {
    const r = await toolTurn(layers({ approval_policy: "always" }), "ls", {});
    assert.ok(r.asked !== null);
    assert.equal(r.asked.risk, "read_only");
    assert.doesNotMatch(r.stderr, /ignoring approval_policy/);
  });

  it('the global "never" applies (no project file, and a project saying "never" too)', async () => {
    for (const project of [null, { approval_policy: "never" }]) {
      const r = await toolTurn(layers(project, { approval_policy: "never" }), "bash", { command: "echo unasked" });
      assert.equal(r.asked, null, `asked with project ${JSON.stringify(project)}`);
      assert.equal(r.terminal.type, "turn.completed");
      assert.doesNotMatch(r.stderr, /ignoring approval_policy/);
    }
  });

  it("a value that is not a policy fails the turn naming the setting, never its value", async () => {
    for (const [project, global, file] of [
      [null, { approval_policy: "Never-sk-0123456789" }, "the global settings file"],
      [{ approval_policy: "sometimes-sk-0123456789" }, {}, "the project settings file"],
    ] as const) {
      const r = await toolTurn(layers(project, global), "ls", {});
      assert.equal(r.terminal.type, "turn.failed");
      assert.equal(r.asked, null);
      assert.ok((r.terminal.message as string).startsWith(file), r.terminal.message as string);
      assert.match(r.terminal.message as string, /has a setting of the wrong shape at \$\.approval_policy; fix or remove it/);
      assert.doesNotMatch(r.terminal.message as string, /sk-0123456789/);
    }
    assert.equal(rig.fake.unscript(), 2, "a turn that failed on its settings sent a request");
    writeFileSync(join(rig.home, "settings.json"), globalSettings);
  });

  it("a FIFO as the launch directory's settings file fails the turn naming the file's scope, and never blocks the server", async () => {
    const dir = layers(null);
    mkdirSync(join(dir, ".berth"), { mode: 0o700 });
    execFileSync("mkfifo", [join(dir, ".berth", "settings.json")]);
    const r = await toolTurn(dir, "ls", {});
    assert.equal(r.terminal.type, "turn.failed");
    assert.match(String(r.terminal.message), /the project settings file \(\.berth\/settings\.json in the workspace\) is not a regular file \(a directory, FIFO or device\); replace it with a file or remove it/);
    assert.equal(rig.fake.unscript(), 1, "a turn that failed on its settings sent a request");
  });

  describe("a session working in another directory (a daemon's sessions, a berth chat attached to it)", () => {
    it('its own directory\'s "always" applies, and the launch directory\'s "always" still does', async () => {
      for (const [launch, own] of [
        [null, { approval_policy: "always" }],
        [{ approval_policy: "always" }, null],
      ] as const) {
        const launchDir = layers(launch);
        const r = await toolTurn(launchDir, "ls", {}, layers(own));
        assert.ok(r.asked !== null, `ls ran without asking (launch ${JSON.stringify(launch)}, session ${JSON.stringify(own)})`);
        assert.equal(r.asked.risk, "read_only");
        assert.doesNotMatch(r.stderr, /ignoring/);
      }
    });

    it('its own directory\'s "never" does not loosen: bash asks, and stderr names that file', async () => {
      const repo = layers({ approval_policy: "never" });
      const file = join(repo, ".berth", "settings.json");
      const r = await toolTurn(layers(null), "bash", { command: "echo from-the-repo" }, repo);
      assert.ok(r.asked !== null, "bash was run without asking");
      assert.ok(r.stderr.includes(`ignoring approval_policy "never" in ${file}: a project's settings may only make approvals stricter (using "on-risk")`), r.stderr);
    });

    it("an unreadable project file there (bad JSON, a FIFO that would block its reader) is named and ignored for approvals; the turn runs", async () => {
      for (const kind of ["bad JSON", "FIFO"] as const) {
        const repo = layers(null);
        mkdirSync(join(repo, ".berth"), { mode: 0o700 });
        const file = join(repo, ".berth", "settings.json");
        if (kind === "FIFO") execFileSync("mkfifo", [file]);
        else writeFileSync(file, "{ not json", { mode: 0o600 });
        const r = await toolTurn(layers(null), "ls", {}, repo);
        assert.equal(r.asked, null, `${kind}: a read-only tool asked under on-risk`);
        assert.equal(r.terminal.type, "turn.completed", kind);
        assert.ok(r.stderr.includes(`ignoring ${file} for approvals: it is not valid settings (fix or remove it); using "on-risk"`), `${kind}: ${r.stderr}`);
      }
    });
  });
});
