/**
 * EOF while `catalog.refresh` waits on a slow models endpoint: shutdown drains the configuration worker rather
 * than cancelling its refresh (app-service v1 §Catalogs and configuration), so the correlated response is written
 * before the service exits 0 and the cache it wrote is what the next process reads.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ServiceProcess } from "../helpers/service-process.js";
import { waitFor } from "./wire-helpers.js";

const MODELS = { data: [{ id: "claude-slow-1", display_name: "Claude Slow", type: "model" }], has_more: false };

test("EOF during a slow catalog.refresh: the response is written before exit 0 and the cache persists", async () => {
  // @req CFG-EOF-01
  const held: ServerResponse[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(new URL(req.url ?? "/", "http://x").pathname);
    held.push(res);
    server.emit("held");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const env = { ANTHROPIC_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ANTHROPIC_API_KEY: "sk-ant-SECRETMARKER-env" };
  // BERTH_DEBUG_IO: the service reports on stderr when it has seen EOF (see server.ts `onInput`).
  const svc = new ServiceProcess({ env: { ...env, BERTH_DEBUG_IO: "1" } });
  let next: ServiceProcess | null = null;
  try {
    await svc.initialize();
    const from = svc.lines.length;
    const arrived = once(server, "held");
    svc.send({ protocol_version: 1, kind: "request", request_id: "r", method: "catalog.refresh", payload: { provider_id: "anthropic" } });
    await arrived; // the refresh is in flight at the endpoint
    svc.end();
    // The endpoint answers only once the service has seen EOF and stopped reading: the refresh is running at EOF.
    await svc.waitStderr(/berth-io input-eof records=\d+\n/);
    assert.equal(held.length, 1, "the refresh is still waiting on the endpoint");
    for (const res of held) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(MODELS));
    const res = await waitFor(svc, (m) => m.kind === "response" && m.request_id === "r", from);
    assert.deepEqual(res, { protocol_version: 1, kind: "response", request_id: "r", session_id: null, method: "catalog.refresh", payload: { provider_id: "anthropic", state: "fresh_cache" }, error: null });
    const { code } = await svc.exited;
    assert.equal(code, 0);
    assert.equal(svc.lines.length, from + 1, "nothing but the refresh response after EOF");
    assert.equal(svc.partial, "");
    assert.deepEqual(paths, ["/v1/models"], "one discovery request");

    next = new ServiceProcess({ home: svc.home, env });
    await next.initialize();
    const models = await next.request("catalog.models", { provider_id: "anthropic" });
    assert.equal(models.error, null);
    assert.equal(models.payload.state, "fresh_cache");
    assert.deepEqual(
      (models.payload.entries as Array<{ model_id: string; available: boolean }>).map((e) => [e.model_id, e.available]),
      [["claude-slow-1", true]],
    );
    next.end();
    assert.equal((await next.exited).code, 0);
  } finally {
    svc.kill();
    next?.kill();
    server.closeAllConnections();
    server.close();
  }
});
