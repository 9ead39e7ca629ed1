/**
 * kill -9 mid-turn, then restart (real processes): the claimed message gets one short failure reply and never a
 * second turn, also when the platform redelivers it.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, it } from "node:test";
import { fileURLToPath } from "node:url";
import { FAILURE_REPLY } from "../../src/channels/common/bridge.js";
import { FakeIlink } from "../fakes/fake-ilink.js";
import { tempHome } from "./helpers.js";

const CHILD = join(fileURLToPath(new URL(".", import.meta.url)), "bridge-child.js");
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) c.kill("SIGKILL");
});

function startChild(home: string, fake: FakeIlink): { child: ChildProcess; lines: string[]; waitLine: (pred: (l: string) => boolean) => Promise<void> } {
  const child = spawn(process.execPath, [CHILD], {
    env: { ...process.env, BRIDGE_HOME: home, ILINK_BASE: fake.base, ILINK_TOKEN: fake.token, ILINK_BOT: fake.botId, ILINK_OWNER: fake.ownerId },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  let buf = "";
  child.stdout.on("data", (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split("\n");
    buf = parts.pop()!;
    lines.push(...parts);
    for (const w of waiters.splice(0)) w();
  });
  const waitLine = async (pred: (l: string) => boolean): Promise<void> => {
    while (!lines.some(pred)) await new Promise<void>((r) => waiters.push(r));
  };
  return { child, lines, waitLine };
}

it("kill -9 mid-turn then restart: one failure reply, no second turn", async () => {
  const { home, cleanup } = await tempHome();
  const fake = await new FakeIlink().start();
  try {
    const first = startChild(home, fake);
    await first.waitLine((l) => l === "connected");
    const msg = fake.text("a@im.wechat", "hang until killed");
    fake.push(msg);
    await first.waitLine((l) => l === "turn hang until killed");
    const exited = new Promise((r) => first.child.once("exit", r));
    first.child.kill("SIGKILL");
    await exited;
    fake.push({ ...msg }); // the platform redelivers the same message
    const second = startChild(home, fake);
    await second.waitLine((l) => l === "connected");
    await fake.waitSent((s) => s.length >= 1);
    const polls = fake.polls.length;
    fake.push(fake.text("a@im.wechat", "next"));
    await second.waitLine((l) => l === "turn next");
    await fake.waitSent((s) => s.length >= 2);
    assert.ok(fake.polls.length > polls);
    assert.deepEqual(second.lines.filter((l) => l.startsWith("turn ")), ["turn next"], "the claimed message never runs again");
    assert.equal(fake.sent.length, 2);
    assert.ok(fake.sent[0]!.text!.includes(FAILURE_REPLY));
    assert.equal(fake.sent[0]!.contextToken, msg["context_token"]);
    assert.equal(fake.sent[1]!.text, "echo: next");
    second.child.kill("SIGKILL");
  } finally {
    await fake.close();
    await cleanup();
  }
});

it("kill -9 between the parts of a reply: the restart sends the rest with the same ids, no failure reply, no turn", async () => {
  const { home, cleanup } = await tempHome();
  const fake = await new FakeIlink().start();
  try {
    const first = startChild(home, fake);
    await first.waitLine((l) => l === "connected");
    fake.stallSendsAfter = 1; // part 0 is delivered, part 1 hangs in flight
    const msg = fake.text("a@im.wechat", "long answer please");
    fake.push(msg);
    await fake.waitFor(() => fake.stalledSends >= 1);
    const exited = new Promise((r) => first.child.once("exit", r));
    first.child.kill("SIGKILL");
    await exited;
    fake.stallSendsAfter = null;
    const second = startChild(home, fake);
    await second.waitLine((l) => l === "connected");
    await fake.waitSent((s) => s.length >= 3);
    assert.deepEqual(second.lines.filter((l) => l.startsWith("turn ")), []);
    assert.deepEqual(fake.sent.map((s) => [s.clientId.replace(/^r-\d+-/, "r-ID-"), s.text![0], s.text!.length]), [
      ["r-ID-0", "a", 16 * 1024],
      ["r-ID-1", "b", 16 * 1024],
      ["r-ID-2", "c", 100],
    ]);
    assert.equal(fake.sent[0]!.contextToken, msg["context_token"]);
    assert.equal(fake.sent.filter((s) => s.text!.includes(FAILURE_REPLY)).length, 0);
    second.child.kill("SIGKILL");
  } finally {
    await fake.close();
    await cleanup();
  }
});
