/**
 * Berth's SCV extensions used by `berth chat` (docs/scv.md), on the wire of `berth stdio`: `session.start.resume`
 * continues a stored session in its own cwd (history reaches the model), refuses a malformed, unknown or busy ID;
 * `session.start.mcp_servers` gives the session its own MCP servers and refuses a malformed value.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnStdio, startRig, type Rig } from "../scv/client.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

describe("SCV Berth extensions", () => {
  let rig: Rig;
  before(async () => {
    rig = await startRig();
  });
  after(() => rig.fake.close());

  it("resume: continues a stored session in its own cwd; refuses malformed, unknown and busy IDs", async () => {
    const own = realpathSync(mkdtempSync(join(tmpdir(), "scv-own-")));
    const a = spawnStdio(rig.env);
    const started = await a.client.open({}, own);
    const id = started.session_id as string;
    await a.client.turn(id, "remember pomegranate");

    // Busy while the first connection holds it.
    const b = spawnStdio(rig.env);
    await b.client.initialize();
    let rid = b.client.request({ type: "session.start", cwd: tmpdir(), resume: id });
    let r = await b.client.reply(rid, ["session.started"]);
    assert.equal(r.type, "error");
    assert.equal(r.code, "invalid_request");
    assert.match(r.message as string, /in use by another connection or Berth process/);
    rid = b.client.request({ type: "session.start", cwd: tmpdir(), resume: "../etc" });
    r = await b.client.reply(rid, ["session.started"]);
    assert.equal(r.code, "invalid_request");
    rid = b.client.request({ type: "session.start", cwd: tmpdir(), resume: "s000zzzzzzzz-000000000000000000" });
    r = await b.client.reply(rid, ["session.started"]);
    assert.equal(r.code, "session_not_found");
    a.client.end();
    await a.exited;

    rid = b.client.request({ type: "session.start", cwd: tmpdir(), resume: id });
    r = await b.client.reply(rid, ["session.started"]);
    assert.equal(r.type, "session.started");
    assert.equal(r.session_id, id);
    assert.equal(r.cwd, own);
    const before = rig.fake.requests.length;
    await b.client.turn(id, "what fruit?");
    assert.match(rig.fake.requests.slice(before).map((q) => q.body).join(""), /pomegranate/);
    b.client.end();
    await b.exited;
  });

  it("mcp_servers: the session's own MCP servers reach the model; a malformed value is refused", async () => {
    const c = spawnStdio(rig.env);
    await c.client.initialize();
    let rid = c.client.request({ type: "session.start", cwd: tmpdir(), mcp_servers: { x: { args: [] } } });
    const bad = await c.client.reply(rid, ["session.started"]);
    assert.equal(bad.code, "invalid_request");
    assert.match(bad.message as string, /`mcp_servers`\.x\.command must be a non-empty string/);
    rid = c.client.request({ type: "session.start", cwd: tmpdir(), mcp_servers: { sess: { command: process.execPath, args: [FIXTURE] } } });
    const ok = await c.client.reply(rid, ["session.started"]);
    assert.equal(ok.type, "session.started");
    const before = rig.fake.requests.length;
    await c.client.turn(ok.session_id as string, "hi");
    assert.match(rig.fake.requests.slice(before).map((q) => q.body).join(""), /mcp__sess__echo/);
    c.client.end();
    await c.exited;
  });
});
