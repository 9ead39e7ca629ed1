/**
 * `/login` showed the authorization URL as the service sent it. Berth builds that URL, but from parts that come from
 * the environment and settings (the issuer, the redirect), and the chat prints whatever arrives on the wire: an escape
 * sequence in it could retitle the window, hide text or move the cursor. It is now shown as every other value from
 * outside the chat, through terminalSafe.
 *
 * The chat's real `/login` code and app-service client, against an in-process app-service server (the real dispatcher
 * and service methods) whose `auth.login.start` sends an authorization URL with controls planted in its configured
 * parts (issuer path, client id, redirect), as a service reading such settings would.
 */
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { it } from "node:test";
import { ServiceCommands, type CommandHost } from "../../src/cli/chat/service-commands.js";
import { style } from "../../src/cli/chat/render.js";
import { AppServiceClient } from "../../src/client/app-service/index.js";
import type { MethodFamily } from "../../src/protocols/app-service/descriptor.js";
import { serverWithServiceMethods } from "../helpers/app-service-server.js";

const PLANTED =
  "https://auth.example/\u001b]0;owned\u0007oauth/authorize?client_id=app\u001b[8m&redirect_uri=http://localhost:1455/auth/callback\u202e\u009b2J&state=s\r\nfake prompt› ";

/** The `auth.login.start` of a service that sends `url`, then ends the login (cancelled). */
function loginFamily(url: string): MethodFamily {
  const base = { login_id: "login-1", provider_id: "openai-codex" };
  return {
    descriptors: [
      {
        method: "auth.login.start",
        sessionId: "forbidden",
        parse: (p) => ({ ok: true, value: p }),
        handle(ctx) {
          const held = ctx.hold();
          void ctx
            .emit("auth.login.progress", null, { ...base, state: "authorization_url", url, open_browser: true })
            .then(() => ctx.emit("auth.login.terminal", null, { ...base, state: "cancelled", cleanup_complete: true }))
            .then(() => held.release());
          return { payload: { ...base, status: "started" } };
        },
      },
    ],
  };
}

it("/login shows a login URL with planted terminal controls as visible text, on one line", async () => {
  const toServer = new PassThrough();
  const fromServer = new PassThrough();
  const running = serverWithServiceMethods(toServer, fromServer, [loginFamily(PLANTED)]).run();
  const client = new AppServiceClient({ input: fromServer, output: toServer });
  await client.initialize();
  const shown: string[] = [];
  let idle!: () => void;
  const ended = new Promise<void>((r) => (idle = r));
  const host: CommandHost = {
    s: style(false),
    status: (t) => void shown.push(t),
    line: (t) => void shown.push(t),
    error: (e) => void shown.push(`error: ${String(e)}`),
    promptIfIdle: () => idle(),
    modelChanged: () => undefined,
  };
  const cmds = new ServiceCommands(host, () => Promise.resolve({ client, close: () => Promise.resolve(void toServer.end()) }));
  await cmds.startLogin("openai-codex");
  await ended;
  const text = shown.join("\n");
  assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/, `a control reached the terminal: ${JSON.stringify(text)}`);
  const url = shown.find((l) => l.startsWith("Open this URL"))!;
  assert.equal(
    url,
    "Open this URL in your browser to sign in:\n  https://auth.example/^[]0;owned^Goauth/authorize?client_id=app^[[8m&redirect_uri=http://localhost:1455/auth/callback<U+202E><U+009B>2J&state=s^Jfake prompt› ",
  );
  assert.match(text, /Sign-in cancelled|cancelled/i);
  await cmds.close();
  assert.equal(await running, 0);
});
