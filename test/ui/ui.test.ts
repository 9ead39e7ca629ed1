/**
 * The web UI end to end in a real headless Chromium: the spawned daemon (`--berth-runtime`, fake
 * provider on loopback) serves the page, and every step goes through the page's own AHP client.
 *
 * UI-FLOW: list → open → prompt → streamed text (20,000 deltas) → approve a tool → cancel →
 * reconnect (replay from the last serverSeq) after the socket is killed → create a session.
 * UI-TOKEN: the token never appears in a request URL the browser made, nor in cookies, storage
 * or the daemon's (non-TTY) stderr. UI-ORIGIN: a page from another origin cannot connect.
 * UI-EXTERNAL: an external backend's session, watched by two pages: live list, reasoning,
 * an input request answered, a steering message, and a confirmation answered in one page.
 * Figures (list first paint, streaming render lag) are recorded in dist/test-artifacts/ui/perf.json,
 * never asserted against the wall clock.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { AhpClient, FakeBackend, type Json } from "../host/helpers.js";
import { ended, newSession, startTurn } from "../host/berth-rig.js";
import type { HostHandle } from "../../src/protocols/host/host.js";
import { artifactPath, browserSkipReason, docsShot, launchBrowser, patient, SOCKET_TAP, startDaemon, UI_TEST_MS, type Daemon } from "./rig.js";

const skip = browserSkipReason();
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

interface Watch {
  urls: string[];
  sent: string[];
  problems: string[];
}
function watch(ctx: BrowserContext, page: Page): Watch {
  const w: Watch = { urls: [], sent: [], problems: [] };
  ctx.on("request", (r) => w.urls.push(r.url()));
  page.on("websocket", (ws) => {
    w.urls.push(ws.url());
    ws.on("framesent", (f) => w.sent.push(typeof f.payload === "string" ? f.payload : ""));
  });
  page.on("pageerror", (e) => w.problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    // The induced outage makes Chromium log the refused reconnection attempts: expected.
    if (m.type() === "error" && !/WebSocket connection to .*\/blocked/.test(m.text()) && !/\/blocked/.test(m.location().url)) w.problems.push(`console: ${m.text()}`);
  });
  return w;
}

const SHOWCASE_MD = [
  "## Running the tests",
  "",
  "Build first, then run the **whole suite** or a *single* file:",
  "",
  "```ts",
  "// scripts/run-tests.mjs picks compiled tests by substring",
  'const filter = process.argv[2] ?? "";',
  "if (filter.length === 0) console.log(\"all tests\");",
  "```",
  "",
  "- `npm test` runs everything",
  "- [the docs](https://example.invalid/docs) explain the rest; [this](javascript:alert(1)) is not a link",
  "",
  'Raw HTML stays text: <img src="x" onerror="alert(1)"> <script>alert(2)</script>',
  "",
].join("\n");

const transcript = (page: Page) => page.locator(".transcript");
const lastDone = (page: Page) => page.locator(".turn.done").last();

describe("web UI in Chromium", { skip, timeout: UI_TEST_MS }, () => {
  let d: Daemon;
  let browser: Browser;
  before(async () => {
    [d, browser] = await Promise.all([startDaemon(), launchBrowser()]);
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  test("UI-FLOW + UI-TOKEN: list, open, stream, approve, cancel, reconnect, create; token only in the fragment", async (t) => {
    const token = d.ready.token;
    assert.equal(d.ready.ui, `${d.ready.http}/#token=${token}`);
    const handle = { ahpUrl: d.ready.ahp, token } as unknown as HostHandle;
    const { c } = await AhpClient.init(handle);
    try {
      // A session that already exists when the page loads.
      const { chat } = await newSession(c, "ahp-session:/ui-existing", d.cwd);
      startTurn(c, chat, "t0", "hello from the list test");
      assert.equal((await ended(c, "t0")).action.type, "chat/turnComplete");

      const ctx = patient(await browser.newContext({ viewport: DESKTOP }));
      await ctx.addInitScript(SOCKET_TAP);
      const page = patient(await ctx.newPage());
      const w = watch(ctx, page);

      // ── list (first meaningful paint recorded by the page itself)
      await page.goto(d.ready.ui);
      const item = page.locator('[data-session="ahp-session:/ui-existing"]');
      await item.waitFor();
      assert.match(await item.innerText(), /hello from the list test/);
      assert.match(await item.innerText(), /berth/);
      const marks = await page.evaluate<Record<string, number>>(`(() => {
        const m = (n) => performance.getEntriesByName(n)[0]?.startTime ?? -1;
        const nav = performance.getEntriesByType("navigation")[0];
        return { responseEnd: nav?.responseEnd ?? -1, domContentLoaded: nav?.domContentLoadedEventEnd ?? -1, wsOpen: m("berth:ws-open"), initialized: m("berth:initialized"), listPainted: m("berth:list-painted") };
      })()`);
      const listPaintMs = marks.listPainted!;
      assert.ok(listPaintMs > 0, "the page marks the first paint of the loaded session list");
      await page.screenshot({ path: artifactPath("desktop-list.png") });
      // A second, warm load (cached assets, running renderer) for the record.
      await page.reload();
      await item.waitFor();
      const warmPaintMs = await page.evaluate<number>('performance.getEntriesByName("berth:list-painted")[0]?.startTime ?? -1');

      // ── open: the earlier turn is there
      await item.click();
      await transcript(page).getByText("echo: hello from the list test").waitFor();

      // ── prompt → streamed text: 20,000 deltas
      await page.evaluate(() => Object.assign((globalThis as unknown as { __berth: { perf: Record<string, number> } }).__berth.perf, { maxLagMs: 0, deltas: 0, commits: 0, maxCommitMs: 0 }));
      await page.getByLabel("Message").fill("long answer 20000");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.active").waitFor();
      await page.locator(".turn.done").nth(1).waitFor();
      const words = await lastDone(page).locator(".md").evaluate((el) => (el.textContent ?? "").split("word").length - 1);
      assert.equal(words, 20_000, "every delta is rendered");
      const stream = await page.evaluate(() => ({ ...(globalThis as unknown as { __berth: { perf: Record<string, number> } }).__berth.perf }));
      assert.ok(stream.deltas! > 0 && stream.commits! > 0);

      // ── approve a tool: the card shows input, Approve runs it for real
      d.fake.script([{ steps: [{ toolCall: { id: "w1", name: "write", arguments: { path: "from-ui.txt", content: "written after approval" } } }] }, { steps: [{ text: "wrote it" }] }]);
      await page.getByLabel("Message").fill("please write the file");
      await page.keyboard.press("Enter");
      const card = page.locator(".tool.tool-pending-confirmation");
      await card.waitFor();
      assert.match(await card.innerText(), /from-ui\.txt/);
      await page.screenshot({ path: artifactPath("desktop-tool.png") });
      await card.getByRole("button", { name: "Approve" }).click();
      await lastDone(page).getByText("wrote it").waitFor();
      assert.equal(readFileSync(join(d.cwd, "from-ui.txt"), "utf8"), "written after approval");
      assert.match(await lastDone(page).locator(".tool").innerText(), /completed/);

      // ── cancel: the stream stops, the provider socket is closed
      d.fake.script([{ steps: [{ text: "first words " }, { waitForAbort: true }, { text: "never shown" }] }]);
      const before = d.fake.requests.length;
      await page.getByLabel("Message").fill("a slow one");
      await page.getByRole("button", { name: "Send" }).click();
      await page.locator(".turn.active").getByText("first words").waitFor();
      await page.getByRole("button", { name: "Cancel" }).click();
      await page.locator(".turn.done.st-cancelled").getByText("Cancelled").waitFor();
      const reqs = await d.fake.waitForRequests(before + 1);
      await reqs[before]!.socketClosed;
      assert.doesNotMatch(await transcript(page).innerText(), /never shown/);

      // ── reconnect: kill the socket, keep it down while a turn runs elsewhere, then come back
      const sentBeforeOutage = w.sent.length;
      await page.evaluate(() => {
        const tap = (globalThis as unknown as { __uiTest: { socks: WebSocket[]; block: boolean } }).__uiTest;
        tap.block = true;
        tap.socks.at(-1)!.close();
      });
      const banner = page.locator('.banner[data-conn]');
      await banner.getByText("Disconnected").waitFor();
      await page.screenshot({ path: artifactPath("desktop-disconnected.png") });
      startTurn(c, chat, "t-away", "while you were away");
      const away = await ended(c, "t-away");
      assert.equal(away.action.type, "chat/turnComplete", JSON.stringify(away.action));
      await page.evaluate(() => ((globalThis as unknown as { __uiTest: { block: boolean } }).__uiTest.block = false));
      await banner.waitFor({ state: "detached" });
      await lastDone(page).getByText("echo: while you were away").waitFor();
      const methods = w.sent.slice(sentBeforeOutage).map((s) => (JSON.parse(s) as { method?: string; params?: { lastSeenServerSeq?: number } })).filter((m) => m.method === "reconnect" || m.method === "initialize");
      assert.equal(methods.filter((m) => m.method === "initialize").length, 0, "a returning page uses reconnect, not initialize");
      const rec = methods.find((m) => m.method === "reconnect");
      assert.ok(rec && (rec.params?.lastSeenServerSeq ?? 0) > 0, "reconnect from the last seen serverSeq");

      // ── create a session from the dialog, and use it
      await page.getByRole("button", { name: "New session" }).click();
      const dialog = page.getByRole("dialog", { name: "New session" });
      await dialog.getByLabel("Working directory").fill(d.cwd);
      await dialog.getByRole("button", { name: "Create" }).click();
      await dialog.waitFor({ state: "detached" });
      await page.getByLabel("Message").fill("hello new session");
      await page.getByRole("button", { name: "Send" }).click();
      await transcript(page).getByText("echo: hello new session").waitFor();
      await page.locator(".list .item").nth(1).waitFor();
      assert.equal(await page.locator(".list .item").count(), 2);

      // ── in the new session: reasoning, markdown with a highlighted code block, then deny a tool
      d.fake.script([{ steps: [{ thinking: "The user wants the test count; a shell command will tell." }, { text: SHOWCASE_MD }, { toolCall: { id: "b1", name: "bash", arguments: { command: "npm test -- --reporter=dot" } } }] }, { steps: [{ text: "All right, I will not run it." }] }]);
      await page.getByLabel("Message").fill("How do I run the tests? <b>not bold</b>");
      await page.getByRole("button", { name: "Send" }).click();
      const bashCard = page.locator(".tool.tool-pending-confirmation");
      await bashCard.waitFor();
      assert.equal(await page.locator(".user-msg b").count(), 0, "raw HTML in a message is shown as text");
      assert.equal(await page.locator(".md img, .md script, .transcript [onerror]").count(), 0, "raw HTML in an answer is never markup");
      await page.locator(".md").getByText('<img src="x" onerror="alert(1)">', { exact: false }).waitFor();
      assert.equal(await page.locator(".md pre.code .tok-keyword").count() > 0, true, "code blocks are highlighted");
      assert.equal(await page.locator(".md a[href^='javascript']").count(), 0, "unsafe links are not rendered as links");
      assert.equal(await page.locator(".reasoning[open]").count(), 0, "reasoning is collapsed");
      await page.screenshot({ path: artifactPath("desktop-session.png") });
      const shot = docsShot("desktop.png");
      if (shot) await page.screenshot({ path: shot });
      await bashCard.getByRole("button", { name: "Deny" }).click();
      await lastDone(page).getByText("All right, I will not run it.").waitFor();
      assert.match(await lastDone(page).locator(".tool").first().innerText(), /cancelled \(denied\)/);

      // ── a hostile answer (unclosed delimiters a regular expression rescans from each opening): it streams and
      // renders like any other. Before core/markdown-syntax.ts, its renders took minutes (each rescan is quadratic).
      const hostile = ["[a](".repeat(80_000), "", "```c", "/* ".repeat(60_000), '"\\'.repeat(80_000), "`\\".repeat(80_000), "```", "", "end of the hostile answer"].join("\n");
      d.fake.script([{ steps: [{ text: hostile, chunks: 40 }] }]);
      await page.getByLabel("Message").fill("render this");
      await page.getByRole("button", { name: "Send" }).click();
      await lastDone(page).getByText("end of the hostile answer").waitFor();
      assert.equal(await lastDone(page).locator(".md a").count(), 0, "no link in unclosed brackets");
      assert.equal(await lastDone(page).locator(".md pre.code .tok-comment, .md pre.code .tok-string").count(), 0, "unclosed comments and strings are plain");

      // ── UI-TOKEN
      assert.ok(w.urls.length >= 4, `requests seen: ${w.urls.join(", ")}`);
      for (const u of w.urls) assert.ok(!u.includes(token), `token leaked into a request URL: ${u.replace(token, "<token>")}`);
      const stored = await page.evaluate("({ cookie: document.cookie, local: localStorage.length, session: sessionStorage.length })");
      assert.deepEqual(stored, { cookie: "", local: 0, session: 0 });
      assert.ok(!d.stderr().includes(token), "the daemon's redirected stderr never carries the token");
      assert.deepEqual(w.problems, []);

      // ── phone width
      const phone = patient(await browser.newPage({ viewport: PHONE, isMobile: true, hasTouch: true }));
      await phone.goto(d.ready.ui);
      await phone.locator(".list .item").nth(1).waitFor();
      await phone.screenshot({ path: artifactPath("phone-list.png") });
      const pl = docsShot("phone-list.png");
      if (pl) await phone.screenshot({ path: pl });
      await phone.locator(".list .item").first().click();
      await phone.locator(".transcript").getByText("All right, I will not run it.").waitFor();
      assert.equal(await phone.locator(".list").isVisible(), false, "one pane at a time on a phone");
      const overflow = await phone.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");
      assert.equal(overflow, 0, "no horizontal scrolling at phone width");
      await phone.screenshot({ path: artifactPath("phone-session.png") });
      const ps = docsShot("phone-session.png");
      if (ps) await phone.screenshot({ path: ps });
      await phone.close();
      const dl = docsShot("desktop-list.png");
      if (dl) await page.screenshot({ path: dl });
      await ctx.close();

      const perf = {
        listFirstPaintMs: Math.round(listPaintMs * 10) / 10,
        listFirstPaintTargetMs: 300,
        listWarmReloadPaintMs: Math.round(warmPaintMs * 10) / 10,
        listPaintBreakdownMs: Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, Math.round(v * 10) / 10])),
        streamDeltasRendered: stream.deltas,
        streamRenderCommits: stream.commits,
        streamMaxRenderLagMs: Math.round(stream.maxLagMs! * 10) / 10,
        streamMaxRenderLagTargetMs: 100,
        streamMaxCommitMs: Math.round(stream.maxCommitMs! * 10) / 10,
        answerWords: words,
        loadavg1m: Math.round(loadavg()[0]! * 10) / 10,
      };
      writeFileSync(artifactPath("perf.json"), JSON.stringify(perf, null, 2) + "\n");
      t.diagnostic(`ui perf: ${JSON.stringify(perf)}`);
    } finally {
      c.close();
    }
  });

  test("UI-ORIGIN: a page from another origin cannot open the AHP socket, even holding the token", async () => {
    const token = d.ready.token;
    const evil = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<!doctype html><title>elsewhere</title>");
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", r));
    const page = patient(await browser.newPage());
    try {
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      const outcome = (ahp: string, protocols: string[]) =>
        page.evaluate(
          ([url, p]) =>
            new Promise<string>((resolve) => {
              const ws = new WebSocket(url, p);
              ws.onopen = () => resolve("open");
              ws.onclose = () => resolve("refused");
            }),
          [ahp, protocols] as const,
        );
      assert.equal(await outcome(d.ready.ahp, ["berth-ahp", `berth-token.${token}`]), "refused");
      // The same page holding the token in the legacy query form is refused too (Origin check).
      assert.equal(await outcome(`${d.ready.ahp}?tkn=${token}`, []), "refused");
      // Control: from the daemon's own origin the same socket opens, and a wrong token does not.
      await page.goto(`${d.ready.http}/#token=${token}`);
      assert.equal(await outcome(d.ready.ahp, ["berth-ahp", `berth-token.${token}`]), "open");
      assert.equal(await outcome(d.ready.ahp, ["berth-ahp", "berth-token.wrong"]), "refused");
      // The page itself with a wrong token, and with none, says what to do.
      await page.goto(`${d.ready.http}/#token=wrong`); // a fragment-only change: the page loads itself again (main.tsx)
      // It says the token is wrong (the daemon answers: it is not unreachable) and where the right URL is.
      const wrong = page.locator(".banner");
      await wrong.getByText("The token in this page's address is not the daemon's").waitFor();
      assert.match(await wrong.innerText(), /open the URL `berth daemon` printed .*or run `berth open`/);
      // (A new tab: the same URL typed into this one is a reload of it, which keeps its token; token.test.ts.)
      const bare = patient(await browser.newPage());
      await bare.goto(`${d.ready.http}/`);
      await bare.getByText("This page needs the daemon's token").waitFor();
      await bare.close();
    } finally {
      await page.close();
      evil.close();
    }
  });

  test("UI-EXTERNAL: an external backend's session in two pages: live list, reasoning, input, steering, one approval", async () => {
    const a = patient(await browser.newPage({ viewport: DESKTOP }));
    const b = patient(await browser.newPage({ viewport: PHONE }));
    const problems: string[] = [];
    for (const p of [a, b]) p.on("pageerror", (e) => problems.push(e.message));
    await Promise.all([a.goto(d.ready.ui), b.goto(d.ready.ui)]);
    await a.locator(".list").waitFor();
    await b.locator(".list").waitFor();
    const { be, reg } = await FakeBackend.session({ backendSocket: d.ready.backend_socket } as unknown as HostHandle, {
      protocolVersion: 4,
      sourceId: "ui-external",
      title: "External agent",
      inputCapabilities: { freeform: true },
      toolCapabilities: { confirmations: true },
    });
    try {
      const session = reg.session as string;
      const ev = (event: Json) => be.send({ type: "event", session, event });
      const accept = async (type: string): Promise<Json> => {
        const cmd = await be.next((f) => f.type === "command" && (f.command as Json).type === type, type, 10_000);
        be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
        return cmd;
      };
      // The list updates live (root/sessionAdded) in both pages.
      for (const p of [a, b]) await p.locator(`[data-session="${session}"]`).getByText("External agent").click();
      for (const p of [a, b]) await p.getByLabel("Message").waitFor();

      ev({ type: "agent_started", turnId: "X1" });
      ev({ type: "thinking_delta", text: "Weighing the options." });
      ev({ type: "text_delta", text: "Let me ask first." });
      ev({ type: "input_requested", request: { id: "q1", message: "Which target?", questions: [{ id: "t", kind: "single_select", message: "Target", options: [{ id: "prod", label: "Production" }, { id: "stage", label: "Staging" }] }] } });
      const form = a.locator("form.input-req");
      await form.waitFor();
      const reasoning = a.locator(".turn.active .reasoning");
      assert.equal(await reasoning.getAttribute("open"), null, "reasoning starts collapsed");
      await reasoning.locator("summary").click();
      await reasoning.getByText("Weighing the options.").waitFor();
      await form.locator("select").selectOption("stage");
      await form.getByRole("button", { name: "Submit" }).click();
      const ci = await accept("complete_input");
      assert.deepEqual((ci.command as Json).answers, { t: { state: "submitted", value: { kind: "selected", value: "stage" } } });
      ev({ type: "input_resolved", requestId: "q1", response: "accept", commandId: ci.commandId });
      for (const p of [a, b]) await p.locator(".input-done").getByText("answered").waitFor();

      // A steering message from page A, shown as pending in page B once the runtime accepted it.
      await a.getByLabel("Delivery").selectOption("steering");
      await a.getByLabel("Message").fill("prefer the staging database");
      await a.getByRole("button", { name: "Steer" }).click();
      const steer = await accept("steer");
      assert.equal((steer.command as Json).text, "prefer the staging database");
      await b.locator(".pending").getByText("prefer the staging database").waitFor();

      // One confirmation, two pages: B approves, A's buttons go away.
      ev({ type: "tool_started", toolCallId: "tc1", toolName: "deploy", input: JSON.stringify({ target: "stage" }) });
      ev({ type: "tool_confirmation_requested", toolCallId: "tc1", input: JSON.stringify({ target: "stage" }), title: "Deploy to staging" });
      await a.locator(".tool-pending-confirmation").getByRole("button", { name: "Approve" }).waitFor();
      await b.locator(".tool-pending-confirmation").getByRole("button", { name: "Approve" }).click();
      await accept("confirm_tool");
      await a.locator('.tool[data-tool="tc1"] .badge').getByText("running").waitFor();
      assert.equal(await a.getByRole("button", { name: "Approve" }).count(), 0);
      ev({ type: "tool_completed", toolCallId: "tc1", toolName: "deploy", output: "deployed 3 services", isError: false });
      ev({ type: "text_delta", text: " Done." });
      ev({ type: "settled", cancelled: false });
      await a.locator(".turn.done").getByText("Done.").waitFor();
      await a.locator('.tool[data-tool="tc1"] summary').click();
      await a.locator('.tool[data-tool="tc1"]').getByText("deployed 3 services").waitFor();

      // Disposed by another client: the open view closes and the list drops it, live.
      const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle, ["ahp-root://"], "disposer");
      try {
        const r = await c.request("disposeSession", { channel: session });
        assert.equal(r.result, null, JSON.stringify(r.error));
      } finally {
        c.close();
      }
      await a.getByText("Choose a session, or create one.").waitFor();
      await b.locator(`[data-session="${session}"]`).waitFor({ state: "detached" });
      assert.deepEqual(problems, []);
    } finally {
      be.close();
      await a.close();
      await b.close();
    }
  });

  test("UI-HISTORY: older turns are fetched on demand and shown above the newer ones; a forked chat is a tab", async () => {
    const page = patient(await browser.newPage({ viewport: DESKTOP }));
    const { be, reg } = await FakeBackend.session({ backendSocket: d.ready.backend_socket } as unknown as HostHandle, {
      protocolVersion: 3,
      sourceId: "ui-history",
      title: "Long history",
      chatCapabilities: { pagedHistory: true, create: true, fork: true },
      historyNextCursor: "older-1",
      history: [{ id: "h2", userText: "the newer question", responseText: "the newer answer" }],
    });
    try {
      await page.goto(d.ready.ui);
      await page.locator(`[data-session="${reg.session as string}"]`).click();
      await page.getByText("the newer answer").waitFor();
      await page.getByRole("button", { name: "Load earlier turns" }).click();
      const cmd = await be.next((f) => f.type === "command" && (f.command as Json).type === "fetch_turns", "fetch_turns", 10_000);
      assert.equal((cmd.command as Json).cursor, "older-1");
      be.send({ type: "event", session: reg.session, event: { type: "turns_loaded", turns: [{ id: "h1", userText: "the first question", responseText: "the first answer" }] } });
      be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
      await page.getByText("the first answer").waitFor();
      const order = await page.locator(".turn.done .user-msg").allInnerTexts();
      assert.deepEqual(order, ["the first question", "the newer question"]);
      await page.getByRole("button", { name: "Load earlier turns" }).waitFor({ state: "detached" });

      // A chat forked by another client appears as a tab, with the history it was forked from.
      const { c } = await AhpClient.init({ ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle, ["ahp-root://"], "forker");
      try {
        const fork = c.request("createChat", { channel: reg.session, chat: "ahp-chat:/ui-fork", title: "Fork", source: { kind: "fork", chat: reg.chat, turnId: "h2" } });
        const fc = await be.next((f) => f.type === "command" && (f.command as Json).type === "create_chat", "create_chat", 10_000);
        be.send({ type: "command_result", commandId: fc.commandId, accepted: true });
        assert.equal((await fork).result, null);
      } finally {
        c.close();
      }
      const tabs = page.getByRole("navigation", { name: "Chats" });
      await tabs.getByRole("button", { name: "Fork" }).click();
      await tabs.locator("button.on").getByText("Fork").waitFor();
      await page.locator(".transcript").getByText("the newer answer").waitFor();
      // The fork holds the history through its source turn (including the turn loaded earlier).
      assert.deepEqual(await page.locator(".turn.done .user-msg").allInnerTexts(), ["the first question", "the newer question"]);
    } finally {
      be.close();
      await page.close();
    }
  });

  test("UI-LIVENESS: a socket that stops answering (a waking laptop) is dropped and replaced", async () => {
    const ctx = patient(await browser.newContext({ viewport: PHONE }));
    await ctx.addInitScript(SOCKET_TAP);
    const page = patient(await ctx.newPage());
    try {
      await page.goto(d.ready.ui);
      await page.locator(".list .bar").waitFor();
      await page.locator(".banner").waitFor({ state: "detached" });
      // The link goes quiet without closing; the browser reports the network is back.
      await page.evaluate("(() => { globalThis.__uiTest.mute = true; dispatchEvent(new Event('online')); })()");
      await page.locator(".banner").getByText("no answer from the daemon").waitFor();
      // A session opened while offline loads once the connection is back.
      await page.locator('[data-session="ahp-session:/ui-existing"]').click();
      await page.getByText("Loading…").waitFor();
      await page.evaluate("globalThis.__uiTest.mute = false");
      await page.locator(".transcript").getByText("echo: hello from the list test").waitFor();
      await page.locator(".banner").waitFor({ state: "detached" });
      const socks = await page.evaluate<number>("globalThis.__uiTest.socks.length");
      assert.ok(socks >= 2, "a fresh socket replaced the dead one (more if a muted handshake also timed out)");

    } finally {
      await ctx.close();
    }
  });
});
