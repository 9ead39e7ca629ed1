/**
 * Provider `berth` (Berth's runtime as a backend) end to end, AHP client → host → adapter → `Agent` → loopback fake
 * provider: side chats, history paged back past every read window, and history resync (turns another door ran on a
 * session the host already holds reach the host as v11 source snapshots after a restart).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, tempHome, berthHomeFor, until, type Json } from "./helpers.js";
import { ended, newSession, startTurn, user, withBerth } from "./berth-rig.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { SessionStore } from "../../src/store/sessions/index.js";

const messagesOf = (body: unknown): string => JSON.stringify((body as Json).messages ?? body);

test("berth side chat: the source conversation through the turn, the excerpt quoted once, the source chat untouched", () =>
  withBerth(async ({ h, fake, cwd }) => {
    const { c } = await AhpClient.init(h, ["ahp-root://"]);
    const { session, chat } = await newSession(c, "ahp-session:/side", cwd);
    startTurn(c, chat, "t1", "the first question");
    assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete");
    startTurn(c, chat, "t2", "the second question");
    assert.equal((await ended(c, "t2")).action.type, "chat/turnComplete");
    const agents = (await c.request("subscribe", { channel: "ahp-root://" })).result.snapshot.state.agents as Json[];
    assert.equal(agents.find((a) => a.provider === "berth")?.capabilities?.multipleChats?.sideChat, true);

    const side = "ahp-chat:/side-1";
    const n = fake.requests.length;
    const r = await c.request("createChat", {
      channel: session,
      chat: side,
      title: "Aside",
      source: { kind: "sideChat", chat, turnId: "t1", selection: { text: "echo: the first\nquestion" } },
      initialMessage: user("what does that mean?"),
    });
    assert.equal(r.result, null, JSON.stringify(r.error));
    await c.request("subscribe", { channel: side });
    const first = await c.action((e) => e.channel === side && ["chat/turnComplete", "chat/error"].includes(e.action.type), "side turn", 15_000);
    assert.equal(first.action.type, "chat/turnComplete");
    const body = messagesOf(fake.requests[n]!.json);
    assert.match(body, /the first question/, "the side chat sees the source conversation");
    assert.doesNotMatch(body, /the second question/, "but only through its turn");
    assert.match(body, /> echo: the first\\n> question\\n\\nwhat does that mean\?/, "the excerpt is quoted into its first prompt");
    const n2 = fake.requests.length;
    const seq = c.dispatch(side, { type: "chat/turnStarted", turnId: "s2", message: user("and then?") });
    await c.action((e) => e.channel === side && e.action.type === "chat/turnComplete" && e.action.turnId === "s2", "second side turn", 15_000);
    assert.ok(c.actions(side).some((e) => e.origin?.clientSeq === seq && e.rejectionReason === undefined));
    const userTexts = ((fake.requests[n2]!.json as Json).messages as Json[]).filter((m) => m.role === "user").map((m) => JSON.stringify(m.content)).join("\n");
    assert.equal(userTexts.match(/About this excerpt/g)?.length, 1, "the excerpt is not repeated");

    // The side chat's own transcript holds only its turns; the source chat is unchanged.
    const sideState = (await c.request("subscribe", { channel: side })).result.snapshot.state;
    assert.equal(sideState.turns.length, 2);
    const summary = ((await c.request("subscribe", { channel: session })).result.snapshot.state.chats as Json[]).find((x) => x.resource === side)!;
    assert.deepEqual(summary.origin, { kind: "sideChat", chat, turnId: "t1", selection: { text: "echo: the first\nquestion" } });
    const main = (await c.request("subscribe", { channel: chat })).result.snapshot.state;
    assert.deepEqual(main.turns.map((t: Json) => t.id), ["t1", "t2"]);
    // An unknown source turn is refused with the cause.
    const bad = await c.request("createChat", { channel: session, chat: "ahp-chat:/side-2", source: { kind: "sideChat", chat, turnId: "nope" } });
    assert.match(JSON.stringify(bad.error), /side-chat source turn/);
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("berth history pages back past every read window to the session's first turn", async () => {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  try {
    // Another door wrote a long session (about 1.5 MiB) into the Berth store.
    const store = new SessionStore({ home: berthHome });
    const other = await store.create(tempHome());
    const total = 30;
    for (let i = 0; i < total; i++) {
      await other.writer.append({ kind: "user", turn_id: `o${i}`, text: i === 0 ? "deep transcript" : `question ${i}` });
      await other.writer.append({ kind: "terminal", turn_id: `o${i}`, status: "completed", assistant_text: `answer ${i} ${"y".repeat(50 * 1024)}` });
    }
    await other.release();
    // Pages read at most 128 KiB each (two turns): only cursors that carry their place in the file can reach the start.
    await withBerth(
      async ({ h, rt }) => {
        await rt.discovered();
        const { c } = await AhpClient.init(h, ["ahp-root://"]);
        let long: Json | undefined;
        for (let i = 0; long === undefined; i++) {
          assert.ok(i < 2000, "the store session is listed");
          long = ((await c.request("listSessions", {})).result.items as Json[]).find((x) => x.title === "deep transcript");
          if (long === undefined) await new Promise((r) => setTimeout(r, 5));
        }
        const chat: string = (await c.request("subscribe", { channel: long.resource })).result.snapshot.state.defaultChat;
        let state = (await c.request("subscribe", { channel: chat })).result.snapshot.state;
        const firstPage = state.turns.length;
        assert.ok(firstPage > 0 && firstPage < total, `the first page holds the newest turns only (${firstPage})`);
        let fetches = 0;
        while (state.turnsNextCursor !== undefined) {
          assert.ok(++fetches < 100);
          const r = await c.request("fetchTurns", { channel: chat, cursor: state.turnsNextCursor });
          assert.deepEqual(r.result, {}, JSON.stringify(r.error));
          state = (await c.request("subscribe", { channel: chat })).result.snapshot.state;
        }
        assert.ok(fetches >= 10, `many bounded pages (${fetches})`);
        assert.deepEqual(state.turns.map((t: Json) => t.id), Array.from({ length: total }, (_, i) => `o${i}`));
        assert.match(state.turns[0].responseParts[0].content, /^answer 0 y/);
        assert.deepEqual(c.invalid, []);
        c.close();
      },
      { fake, berthHome, historyPage: 4, historyWindowBytes: 128 * 1024 },
    );
  } finally {
    await fake.close();
  }
});

test("berth history resync: turns another door ran on a session the host holds reach it after a restart, once and in order", async () => {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  const home = tempHome();
  let session = "";
  let chat = "";
  let berthId = "";
  try {
    await withBerth(
      async ({ h, cwd }) => {
        const { c } = await AhpClient.init(h, ["ahp-root://"]);
        ({ session, chat } = await newSession(c, "ahp-session:/resync", cwd));
        startTurn(c, chat, "t1", "through the host");
        assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete");
        c.close();
      },
      { fake, berthHome, home },
    );
    // While the daemon is down, another door (same Berth store) runs two more turns on that session.
    const store = new SessionStore({ home: berthHome });
    const listed = await store.list(null, 10);
    berthId = listed.entries[0]!.id;
    const w = await store.acquire(berthId);
    for (const id of ["d1", "d2"]) {
      await w.writer.append({ kind: "user", turn_id: id, text: `from another door ${id}` });
      await w.writer.append({ kind: "terminal", turn_id: id, status: "completed", assistant_text: `answer ${id}` });
    }
    await w.release();
    for (let round = 0; round < 2; round++)
      await withBerth(
        async ({ h, rt }) => {
          await until(() => h.state.sessions.get(session)?.route !== undefined, 10_000, "the session registered again");
          await rt.sync(); // its registration answer has reached the runtime (the resync is queued)
          await rt.historySynced();
          const { c } = await AhpClient.init(h, ["ahp-root://", chat]);
          const state = (await c.request("subscribe", { channel: chat })).result.snapshot.state;
          assert.deepEqual(state.turns.map((t: Json) => t.id), ["t1", "d1", "d2"], `round ${round}`);
          assert.equal(state.turns[2].message.text, "from another door d2");
          assert.equal(state.turns[2].responseParts[0].content, "answer d2");
          assert.deepEqual(c.invalid, []);
          c.close();
          assert.ok(h.state.sessions.has(session));
        },
        { fake, berthHome, home },
      );
  } finally {
    await fake.close();
  }
});

test("berth side chat: an excerpt not yet used survives a restart and goes into the first prompt", async () => {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  const home = tempHome();
  let session = "";
  let chat = "";
  const side = "ahp-chat:/side-kept";
  try {
    await withBerth(
      async ({ h, cwd }) => {
        const { c } = await AhpClient.init(h, ["ahp-root://"]);
        ({ session, chat } = await newSession(c, "ahp-session:/side-kept", cwd));
        startTurn(c, chat, "t1", "a question");
        assert.equal((await ended(c, "t1")).action.type, "chat/turnComplete");
        const r = await c.request("createChat", { channel: session, chat: side, source: { kind: "sideChat", chat, turnId: "t1", selection: { text: "kept excerpt" } } });
        assert.equal(r.result, null, JSON.stringify(r.error));
        c.close();
      },
      { fake, berthHome, home },
    );
    await withBerth(
      async ({ h, rt }) => {
        await until(() => h.state.sessions.get(session)?.route !== undefined, 10_000, "the session registered again");
        await rt.sync();
        const { c } = await AhpClient.init(h, ["ahp-root://", side]);
        const n = fake.requests.length;
        startTurn(c, side, "s1", "explain");
        assert.equal((await ended(c, "s1")).action.type, "chat/turnComplete");
        const body = messagesOf(fake.requests[n]!.json);
        assert.match(body, /a question/);
        assert.match(body, /> kept excerpt\\n\\nexplain/);
        assert.deepEqual(c.invalid, []);
        c.close();
      },
      { fake, berthHome, home },
    );
  } finally {
    await fake.close();
  }
});

test("berth history after the host lost its state: the session's turns come back with its registration", async () => {
  const fake = await startFakeProvider();
  const berthHome = berthHomeFor(fake);
  const home = tempHome();
  try {
    await withBerth(
      async ({ h, cwd }) => {
        const { c } = await AhpClient.init(h, ["ahp-root://"]);
        const { chat } = await newSession(c, "ahp-session:/lost", cwd);
        for (const id of ["t1", "t2"]) {
          startTurn(c, chat, id, `question ${id}`);
          assert.equal((await ended(c, id)).action.type, "chat/turnComplete");
        }
        c.close();
      },
      { fake, berthHome, home },
    );
    // The host database is gone (the Berth registry beside it is kept).
    for (const f of readdirSync(join(home, "host"))) if (f.startsWith("host.db")) rmSync(join(home, "host", f));
    await withBerth(
      async ({ h, rt }) => {
        await rt.sync();
        const { c } = await AhpClient.init(h, ["ahp-root://"]);
        let items: Json[] = [];
        for (let i = 0; items.length === 0; i++) {
          assert.ok(i < 2000, "the session registers again");
          items = (await c.request("listSessions", {})).result.items as Json[];
          if (items.length === 0) await new Promise((r) => setTimeout(r, 5));
        }
        assert.equal(items.length, 1);
        const chat: string = (await c.request("subscribe", { channel: items[0]!.resource })).result.snapshot.state.defaultChat;
        const state = (await c.request("subscribe", { channel: chat })).result.snapshot.state;
        assert.deepEqual(state.turns.map((t: Json) => [t.id, t.message.text]), [["t1", "question t1"], ["t2", "question t2"]]);
        assert.deepEqual(c.invalid, []);
        c.close();
      },
      { fake, berthHome, home },
    );
  } finally {
    await fake.close();
  }
});
