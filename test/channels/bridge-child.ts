/**
 * A WeChat bridge in its own process, for the kill -9 test: env BRIDGE_HOME, ILINK_BASE, ILINK_TOKEN, ILINK_BOT,
 * ILINK_OWNER. Prints `connected` once healthy and `turn <prompt>` when a turn starts; prompts containing `hang`
 * never finish; `long` answers with three 16 KiB parts (a…, b…, c…).
 */
import { WechatComponent } from "../../src/channels/wechat/component.js";
import { FakeSessionDriver } from "../fakes/fake-session-driver.js";

const env = (k: string): string => process.env[k] ?? "";
const driver = new FakeSessionDriver();
driver.respond = (t) => {
  process.stdout.write(`turn ${t.prompt}\n`);
  if (t.prompt.includes("hang")) return new Promise(() => undefined);
  if (t.prompt.includes("long")) return Promise.resolve({ text: "a".repeat(16 * 1024) + "b".repeat(16 * 1024) + "c".repeat(100) });
  return Promise.resolve({ text: `echo: ${t.prompt}` });
};
const comp = new WechatComponent({
  home: env("BRIDGE_HOME"),
  account: "default",
  credentials: { bot_token: env("ILINK_TOKEN"), bot_id: env("ILINK_BOT"), user_id: env("ILINK_OWNER"), base_url: env("ILINK_BASE"), cdn_url: `${env("ILINK_BASE")}/c2c`, saved_unix_seconds: 0 },
  settings: { enabled: true, workspace: env("BRIDGE_HOME"), remoteTools: "none", senders: "anyone" },
  driver,
});
await comp.start();
await comp.health.until((h) => h.state === "connected");
process.stdout.write("connected\n");
