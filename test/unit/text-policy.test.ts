/**
 * The secret redaction of titles and replay text (core/text-policy.ts). `redactSecrets` skips a regex pass when the
 * text holds none of the literals every match of that pass contains (issue 19: a first turn's title then compiles no
 * large alternation); its output must stay exactly what the unconditional passes give.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { looksLikeKey, REDACTED, SECRET_SHAPES, redactSecrets, titleFrom, wellFormedJson, wellFormedText } from "../../src/core/text-policy.js";

/** The passes without the literal hints, as they ran before (the reference). */
function reference(s: string): string {
  const tokens = new RegExp(SECRET_SHAPES.flatMap((x) => (x.token !== null ? [x.token] : [])).join("|"), "g");
  const bearer = /\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{12,}/gi;
  const assignment =
    /\b((?:api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret|secret|password|passwd|token)["']?\s*[:=]\s*["']?)[^\s"',;]{8,}/gi;
  let out = s.replace(tokens, REDACTED);
  out = out.replace(bearer, (_m, scheme: string) => `${scheme} ${REDACTED}`);
  if (out.includes(":") || out.includes("=")) out = out.replace(assignment, (_m, key: string) => `${key}${REDACTED}`);
  return out;
}

const SECRETS = [
  "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
  "-----BEGIN OPENSSH PRIVATE KEY----- truncated",
  "sk-abcdefghijklmnop1234",
  "sk-ant-abcdefghijklmnopqrstu",
  "pk-live-ABCDEFGHIJKLMNOPQR",
  "rk-test-0123456789abcdefgh",
  "ghp_abcdefghijklmnopqrstuvwxyz0123",
  "gho_ABCDEFGHIJKLMNOPQRSTUV",
  "github_pat_ABCDEFGHIJKLMNOPQRSTUVWX_yz",
  "xoxb-1234567890-abcdef",
  "xoxp-abcdefghijklmnop",
  "AKIAABCDEFGHIJKLMNOP",
  "ASIAABCDEFGHIJKLMNOP",
  "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
  "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmnop",
  "Bearer abcdefghijklmnop",
  "bearer ABCDEFGHIJKL.mnop",
  "BASIC dXNlcjpwYXNzd29yZA==",
  "Token abcdef0123456789",
  "TOKEN\tabcdef0123456789xyz",
  "api_key=abcdefgh12345",
  'password: "hunter2hunter2"',
  "client-secret=zzzzzzzzzz",
];
const TEXT = ["", "long answer 1000", "fix the build, then run the tests", "é😀 naïve café", "sk-short", "Bearer short", "token: 1234567", "a_b k- xox KIA SIA eyJ AIza basic"];

it("redactSecrets redacts every credential shape exactly as the unconditional passes do", () => {
  for (const secret of SECRETS) {
    for (const around of TEXT) {
      for (const s of [secret, `${around} ${secret}`, `${secret} ${around}`, `${around}\n${secret}\n${around}`]) {
        const got = redactSecrets(s);
        assert.equal(got, reference(s), JSON.stringify(s));
        assert.ok(got.includes(REDACTED), `not redacted: ${JSON.stringify(s)}`);
      }
    }
  }
});

it("redactSecrets leaves text without credential shapes unchanged, as before", () => {
  for (const s of TEXT) assert.equal(redactSecrets(s), reference(s));
  assert.equal(redactSecrets("long answer 1000"), "long answer 1000");
  assert.equal(titleFrom("  long\n answer\t1000 "), "long answer 1000");
  assert.equal(titleFrom("use Bearer abcdefghijklmnop now"), `use Bearer ${REDACTED} now`);
});

it("looksLikeKey: variable names are shown, keys pasted where a name belongs are not", () => {
  for (const name of ["MY_KEY", "OPENAI_API_KEY", "KEYED_API_KEY", "BERTH_TEST_UNSET_KEY", "_PRIVATE", "DEEPSEEK_API_KEY_2"]) assert.equal(looksLikeKey(name), false, name);
  for (const key of [
    "sk-proj-0123456789abcdefghijklmnop",
    "sk-ant-api03-abcdefghijklmnop",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "AKIAIOSFODNN7EXAMPLE",
    "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0",
    "MY_KEY_0a1b2c3d4e5f6a7b8c9d0e1f2a3b",
  ])
    assert.equal(looksLikeKey(key), true, key);
});

it("wellFormedJson: the same value when every string is Unicode text, else a copy with U+FFFD; deep nesting is fine", () => {
  const ok = { a: ["x", { b: "😀" }], n: 1, t: true, z: null };
  assert.equal(wellFormedJson(ok), ok);
  const bad = { a: ["x\ud800", { ["k\udc00"]: "y" }], n: 1, "\\ud800": "\\ud800" };
  const fixed = wellFormedJson(bad);
  assert.deepEqual(fixed, { a: ["x\ufffd", { ["k\ufffd"]: "y" }], n: 1, "\\ud800": "\\ud800" });
  assert.equal(bad.a[0], "x\ud800", "the input is not changed");
  let deep: unknown = "end\ud800";
  for (let i = 0; i < 100_000; i++) deep = [deep];
  let out = wellFormedJson<unknown>(deep);
  for (let i = 0; i < 100_000; i++) out = (out as unknown[])[0];
  assert.equal(out, "end\ufffd");
  assert.equal(wellFormedText("a\udc00b\ud83d\ude00"), "a\ufffdb😀");
});
