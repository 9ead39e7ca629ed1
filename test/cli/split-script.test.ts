/**
 * The two-part script of `berth stdio` and `berth service` (scripts/code-cache.mjs, SPLIT_COMMANDS; docs/runtime.md,
 * "Two scripts"): the handshake is served from the first part alone, the second part (every module the first imports
 * lazily) is read and deserialised after it. Each case runs on a scratch copy of the package (test/helpers/package-copy.ts).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { bundled, packageCopy, restCachePath, restScriptPath } from "../helpers/package-copy.js";

const skip = !bundled() && "dist/cold/ is older than the last tsc build";

interface Run {
  initialized: boolean;
  /** The session request's answer: `session.started`, or the error frame's message. */
  session: string;
  terminal: string;
  stderr: string;
}

/**
 * `berth stdio` from `root`: handshake; `afterHandshake(root)`; a session and (if it starts) one turn against `fake`.
 */
function stdioRun(root: string, fake: FakeProvider, afterHandshake: () => void = () => undefined): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), "berth-split-"));
  writeFileSync(join(dir, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
  const child = spawn(join(root, "bin", "berth"), ["stdio"], { env: { PATH: process.env["PATH"], HOME: dir, MC_HOME: dir, BERTH_DEBUG_TIMING: "1" }, cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
  const run: Run = { initialized: false, session: "", terminal: "", stderr: "" };
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (run.stderr += d));
  const send = (m: unknown): void => void child.stdin.write(JSON.stringify(m) + "\n");
  let buf = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let k; (k = buf.indexOf("\n")) !== -1; ) {
      const m = JSON.parse(buf.slice(0, k)) as { type: string; session_id?: string; message?: string; request_id?: string };
      buf = buf.slice(k + 1);
      if (m.type === "initialized") {
        run.initialized = true;
        afterHandshake();
        send({ type: "session.start", request_id: "s", cwd: dir });
      } else if (m.type === "session.started") {
        run.session = m.type;
        send({ type: "turn.start", request_id: "t", session_id: m.session_id, prompt: "hello" });
      } else if (m.type === "error" && m.request_id === "s") {
        run.session = m.message ?? "";
        child.stdin.end();
      } else if (/^turn\.(completed|failed|cancelled)$/.test(m.type)) {
        run.terminal = m.type;
        child.stdin.end();
      }
    }
  });
  send({ type: "initialize", request_id: "i", protocol_version: 3 });
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", () => {
      rmSync(dir, { recursive: true, force: true });
      resolve(run);
    });
  });
}

/** `magi-code --app service` from `root`: handshake, then `session.create`; the answer's line and stderr. */
function serviceSession(root: string): Promise<{ initialized: boolean; answer: string; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), "berth-split-"));
  const child = spawn(join(root, "bin", "magi-code"), ["--app", "service"], { env: { PATH: process.env["PATH"], HOME: dir, MC_HOME: dir }, cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
  const out = { initialized: false, answer: "", stderr: "" };
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (out.stderr += d));
  const req = (id: string, method: string): string => JSON.stringify({ protocol_version: 1, kind: "request", request_id: id, method, payload: method === "initialize" ? { supported_protocol_versions: [1] } : {} }) + "\n";
  let buf = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let k; (k = buf.indexOf("\n")) !== -1; ) {
      const line = buf.slice(0, k);
      buf = buf.slice(k + 1);
      const m = JSON.parse(line) as { request_id?: string; error?: unknown };
      if (m.request_id === "i") {
        out.initialized = m.error === null;
        child.stdin.write(req("s", "session.create"));
      } else if (m.request_id === "s") {
        out.answer = line;
        child.stdin.end();
      }
    }
  });
  child.stdin.write(req("i", "initialize"));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", () => {
      rmSync(dir, { recursive: true, force: true });
      resolve(out);
    });
  });
}

/** Makes the second part of `command`'s script fail to compile though it still names its build (a longer text). */
function breakSecondPart(root: string, command: string): void {
  const file = restScriptPath(root, command);
  writeFileSync(file, "}}}" + readFileSync(file, "latin1"), "latin1");
}

test("the handshake needs only the first part: a second part that does not compile fails the session request, naming the file and the fix", { skip, timeout: 60_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  const roots = [packageCopy("berth-split-"), packageCopy("berth-split-")];
  try {
    breakSecondPart(roots[0]!, "stdio");
    const stdio = await stdioRun(roots[0]!, fake);
    assert.ok(stdio.initialized, stdio.stderr);
    assert.match(stdio.stderr, /boot code cache\n/);
    assert.equal(stdio.session, "the session host could not start; see stderr");
    assert.ok(stdio.stderr.includes(`${restScriptPath(roots[0]!, "stdio")} does not compile`), stdio.stderr);
    assert.match(stdio.stderr, /run `npm run build`/);

    breakSecondPart(roots[1]!, "service");
    const service = await serviceSession(roots[1]!);
    assert.ok(service.initialized, service.stderr);
    assert.match(service.answer, /"code":"internal_error"/);
    assert.ok(service.stderr.includes(`loading session.create failed: berth: ${restScriptPath(roots[1]!, "service")} does not compile`), service.stderr);
  } finally {
    await fake.close();
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
});

test("a second part's cache V8 rejects leaves that part to be compiled as it runs: the session and turn are served", { skip, timeout: 60_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  const root = packageCopy("berth-split-");
  try {
    const data = readFileSync(restCachePath(root, "stdio"));
    data.fill(0x5a, 16);
    writeFileSync(restCachePath(root, "stdio"), data);
    const run = await stdioRun(root, fake);
    assert.match(run.stderr, /boot code cache\n/);
    assert.match(run.stderr, /rest code cache rejected\n/);
    assert.equal(run.session, "session.started", run.stderr);
    assert.equal(run.terminal, "turn.completed", run.stderr);
  } finally {
    await fake.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("a rebuild after the handshake does not mix builds: the process reads the second part it opened at boot", { skip, timeout: 60_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  const root = packageCopy("berth-split-");
  try {
    const run = await stdioRun(root, fake, () => {
      // As `npm run build` does: the old files removed, new ones (here of no use to this process) in their place.
      for (const f of [restScriptPath(root, "stdio"), restCachePath(root, "stdio")]) {
        rmSync(f);
        writeFileSync(f, "}}} another build");
      }
    });
    assert.equal(run.session, "session.started", run.stderr);
    assert.equal(run.terminal, "turn.completed", run.stderr);
    assert.match(run.stderr, /rest code cache\n/);
  } finally {
    await fake.close();
    rmSync(root, { recursive: true, force: true });
  }
});
