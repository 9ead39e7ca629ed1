/** The tool-argument schema builder: JSON Schema for models and strict validation from one definition. */
import { it } from "node:test";
import assert from "node:assert/strict";
import * as A from "../../src/core/arg-schema.js";

const S = A.object({
  path: A.string({ min: 1, max: 5, description: "a path" }),
  limit: A.optional(A.number({ integer: true, min: 1, max: 10 })),
  t: A.optional(A.number({ exclusiveMin: 0 })),
  all: A.optional(A.boolean()),
});

it("advertises a strict JSON Schema with required fields", () => {
  assert.deepEqual(S.json, {
    type: "object",
    properties: {
      path: { type: "string", minLength: 1, maxLength: 5, description: "a path" },
      limit: { type: "integer", minimum: 1, maximum: 10 },
      t: { type: "number", exclusiveMinimum: 0 },
      all: { type: "boolean" },
    },
    additionalProperties: false,
    required: ["path"],
  });
});

it("validates types, bounds, optional and unknown fields", () => {
  assert.deepEqual(A.parse(S, { path: "a" }), { ok: true, value: { path: "a" } });
  assert.deepEqual(A.parse(S, { path: "abcde", limit: 10, t: 0.5, all: false }), { ok: true, value: { path: "abcde", limit: 10, t: 0.5, all: false } });
  const bad = (v: unknown) => {
    const r = A.parse(S, v);
    assert.equal(r.ok, false);
    return r.ok ? [] : r.issues;
  };
  assert.deepEqual(bad({}), ["path: expected string"]);
  assert.deepEqual(bad({ path: "" }), ["path: must be at least 1 characters"]);
  assert.deepEqual(bad({ path: "abcdef" }), ["path: must be at most 5 characters"]);
  assert.deepEqual(bad({ path: "a", limit: 1.5 }), ["limit: expected integer"]);
  assert.deepEqual(bad({ path: "a", limit: 11 }), ["limit: must be <= 10"]);
  assert.deepEqual(bad({ path: "a", t: 0 }), ["t: must be > 0"]);
  assert.deepEqual(bad({ path: "a", limit: "3" }), ["limit: expected number"]);
  assert.deepEqual(bad({ path: "a", extra: 1 }), ["extra: unknown field"]);
  assert.deepEqual(bad(null), ["(arguments): expected object"]);
  assert.deepEqual(bad({ path: "a", limit: Number.NaN }), ["limit: expected number"]);
});
