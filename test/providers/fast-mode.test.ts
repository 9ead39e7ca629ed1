/** Fast mode on each wire: the field the provider request carries (docs/providers.md), and nothing when off. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ANTHROPIC_FAST_MODE_BETA } from "../../src/runtime/providers/anthropic.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request } from "./helpers.js";

void test("fast:true adds each API's priority field; fast off or absent sends none", async (t) => {
  const fake = await startFakeProvider();
  t.after(() => fake.close());
  for (const api of APIS) {
    for (const fast of [true, false, undefined]) {
      const { provider } = makeProvider(api, fake, api === "anthropic" ? { headers: { "anthropic-beta": "other-beta" } } : {});
      const n = fake.requests.length;
      const events = await collect(provider.stream(request(fast === undefined ? {} : { fast })));
      assert.equal(events.at(-1)?.type, "done");
      const req = fake.requests[n]!;
      const body = req.json as Record<string, unknown>;
      if (api === "anthropic") {
        assert.equal(body["speed"], fast === true ? "fast" : undefined);
        assert.equal(req.headers["anthropic-beta"], fast === true ? `other-beta,${ANTHROPIC_FAST_MODE_BETA}` : "other-beta");
        assert.equal(body["service_tier"], undefined);
      } else {
        assert.equal(body["service_tier"], fast === true ? "priority" : undefined, `${api} fast=${String(fast)}`);
        assert.equal(body["speed"], undefined);
      }
    }
  }
});
