/**
 * Web UI figures in a real headless Chromium (skipped, with a note, where none is installed):
 *  - first paint of the loaded session list, from navigation start, in fresh browser contexts;
 *    floor: a Node client doing the same work over loopback (GET the page and its assets, open
 *    the AHP socket, initialize, listSessions);
 *  - the worst wait of a received-but-unrendered delta while a 20,000-delta answer streams;
 *    floor: how long a Node AHP client takes to receive that same number of deltas;
 *  - the longest render while a ~1 MB markdown answer streams in, 10 kB a frame (an external backend's deltas);
 *    floor: the longest render while a 20 kB answer streams in the same way;
 *  - the same for an answer that is one ~1 MB fenced code block, in 20,000 deltas of 50 characters, 10 kB a frame;
 *    floor: a 20 kB code block streamed the same way.
 */
import { loadavg } from "node:os";
import WebSocket from "ws";
import type { Figure } from "./run.js";
import { AhpClient, FakeBackend, type Json } from "../test/host/helpers.js";
import { ended, newSession, startTurn } from "../test/host/berth-rig.js";
import { browserSkipReason, launchBrowser, startDaemon, type Daemon } from "../test/ui/rig.js";
import type { Browser } from "playwright-core";
import type { HostHandle } from "../src/protocols/host/host.js";
import { wsText } from "../src/transport/ws-text.js";

const RUNS = 5;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number) => Math.round(x * 10) / 10;

async function nodeListFloor(http: string, ahp: string, token: string): Promise<number> {
  const t0 = performance.now();
  const html = await (await fetch(`${http}/`)).text();
  await Promise.all([...html.matchAll(/(?:src|href)="\.?(\/assets\/[^"]+)"/g)].map(async (m) => (await fetch(`${http}${m[1]}`)).arrayBuffer()));
  const ws = new WebSocket(ahp, ["berth-ahp", `berth-token.${token}`], { headers: { Origin: http } });
  await new Promise((r) => ws.once("open", r));
  const answers = new Map<number, (v: unknown) => void>();
  ws.on("message", (d) => {
    const m = JSON.parse(wsText(d)) as { id?: number; result?: unknown };
    if (typeof m.id === "number") answers.get(m.id)?.(m.result);
  });
  const call = (id: number, method: string, params: unknown) =>
    new Promise((r) => {
      answers.set(id, r);
      ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  await call(1, "initialize", { protocolVersions: ["1.0.0"], clientId: `floor-${t0}`, initialSubscriptions: ["ahp-root://"] });
  await call(2, "listSessions", {});
  const ms = performance.now() - t0;
  ws.close();
  return ms;
}

/** About `n` characters of markdown: paragraphs of prose, with a heading, a list and a code block now and then. */
function longAnswer(n: number): string {
  const words = ["the", "answer", "**keeps**", "going", "with", "`code`", "and", "[links](https://example.test/x)", "*some*", "prose"];
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < n; i++) {
    let para = "";
    for (let w = 0; para.length < 600; w++) para += words[(i * 7 + w * 3) % words.length] + (w % 12 === 11 ? "\n" : " ");
    const part = i % 10 === 0 ? `## Section ${i / 10}\n\n${para}` : i % 10 === 5 ? `- one ${i}\n- two\n\n\`\`\`js\nconst x = ${i}; // note\n\`\`\`\n\n${para}` : para;
    parts.push(part);
    size += part.length + 2;
  }
  return parts.join("\n\n").slice(0, n);
}

/** About `n` characters: one fenced TypeScript block, every line with a keyword, a string, a number and a comment. */
function codeAnswer(n: number): string {
  let s = "Here it is:\n\n```ts\n";
  for (let i = 0; s.length < n - 4; i++) s += i % 50 === 0 ? `/* part ${i} */\n` : `  if (x${i} > ${i}) return \`v\${x${i}}\` + "s"; // line ${i}\n`;
  return s.slice(0, n - 4) + "\n```";
}

/**
 * The longest render (ms) of a fresh page while `text` streams in, in deltas of `delta` characters, 10 kB per
 * rendered frame, and then completes (`streamingMs`: before it completes).
 */
async function longestRender(d: Daemon, browser: Browser, text: string, delta: number, id: string): Promise<{ ms: number; streamingMs: number; commits: number }> {
  const { be, reg } = await FakeBackend.session({ backendSocket: d.ready.backend_socket } as unknown as HostHandle, { protocolVersion: 4, sourceId: id, title: id });
  const session = reg.session as string;
  const ev = (event: Json) => be.send({ type: "event", session, event });
  const page = await browser.newPage();
  page.setDefaultTimeout(120_000);
  try {
    await page.goto(d.ready.ui);
    await page.locator(`[data-session="${session}"]`).click();
    await page.getByLabel("Message").waitFor();
    await page.evaluate("Object.assign(globalThis.__berth.perf, { maxCommitMs: 0, commits: 0 })");
    ev({ type: "agent_started", turnId: `${id}-1` });
    for (let at = 0; at < text.length; at += 10_000) {
      const commits = await page.evaluate<number>("globalThis.__berth.perf.commits");
      for (let k = at; k < Math.min(at + 10_000, text.length); k += delta) ev({ type: "text_delta", text: text.slice(k, Math.min(k + delta, text.length)) });
      // The page's CSP forbids waitForFunction's eval: the page polls its own counter.
      await page.evaluate(`new Promise((done) => { const t = () => (globalThis.__berth.perf.commits > ${commits} ? done() : setTimeout(t, 4)); t(); })`);
    }
    const streaming = await page.evaluate<Record<string, number>>("({ ...globalThis.__berth.perf })");
    ev({ type: "settled", cancelled: false });
    await page.locator(".turn.done").waitFor();
    const perf = await page.evaluate<Record<string, number>>("({ ...globalThis.__berth.perf })");
    return { ms: perf.maxCommitMs!, streamingMs: streaming.maxCommitMs!, commits: perf.commits! };
  } finally {
    be.close();
    await page.close();
  }
}

export default async (): Promise<Figure[]> => {
  const skip = browserSkipReason();
  if (skip) return [{ name: "ui.skipped", value: 0, unit: "", note: skip }];
  const d = await startDaemon();
  const browser = await launchBrowser();
  const figures: Figure[] = [];
  try {
    const handle = { ahpUrl: d.ready.ahp, token: d.ready.token } as unknown as HostHandle;
    const { c } = await AhpClient.init(handle);
    const { chat } = await newSession(c, "ahp-session:/bench-ui", d.cwd);
    startTurn(c, chat, "warm", "hello");
    await ended(c, "warm");

    const paints: number[] = [];
    const floors: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const ctx = await browser.newContext();
      const page = await ctx.newPage();
      await page.goto(d.ready.ui);
      await page.locator('[data-session="ahp-session:/bench-ui"]').waitFor();
      paints.push(await page.evaluate<number>('performance.getEntriesByName("berth:list-painted")[0].startTime'));
      await ctx.close();
      floors.push(await nodeListFloor(d.ready.http, d.ready.ahp, d.ready.token));
    }
    figures.push({ name: "ui.list_first_paint_ms.median", value: round(median(paints)), unit: "ms", target: "<= 300", ok: median(paints) <= 300, floor: round(median(floors)), runs: RUNS, loadavg_1m: round(loadavg()[0]!) });

    // The stream: the page renders it while a Node client subscribed to the same chat times it.
    const page = await browser.newPage();
    await page.goto(d.ready.ui);
    await page.locator('[data-session="ahp-session:/bench-ui"]').click();
    await page.getByLabel("Message").waitFor();
    let first = 0;
    let last = 0;
    let deltas = 0;
    const onFrame = (data: WebSocket.RawData) => {
      const n = JSON.parse(wsText(data)) as { method?: string; params?: { action?: { type?: string } } };
      if (n.method === "action" && n.params?.action?.type === "chat/delta") {
        const now = performance.now();
        if (!first) first = now;
        last = now;
        deltas++;
      }
    };
    (c.ws).on("message", onFrame);
    startTurn(c, chat, "long", "long answer 20000");
    await ended(c, "long");
    await page.locator(".turn.done").nth(1).waitFor({ timeout: 60_000 });
    const perf = await page.evaluate<Record<string, number>>("({ ...globalThis.__berth.perf })");
    c.ws.off("message", onFrame);
    figures.push({
      name: "ui.stream_20000_deltas.max_render_lag_ms",
      value: round(perf.maxLagMs!),
      unit: "ms",
      target: "<= 100",
      ok: perf.maxLagMs! <= 100,
      floor: round(last - first),
      floor_note: "Node AHP client: first to last delta received",
      deltas_rendered: perf.deltas,
      node_deltas: deltas,
      commits: perf.commits,
      max_commit_ms: round(perf.maxCommitMs!),
      loadavg_1m: round(loadavg()[0]!),
    });
    c.close();

    // The longest render while 1 MB streams in deltas of `chunk` characters, beside the same for 20 kB (the floor).
    const renderFigure = async (name: string, what: string, make: (chars: number) => string, chunk: number, tag: string): Promise<void> => {
      const floor = await longestRender(d, browser, make(20_000), chunk, `${tag}-short`);
      const long = await longestRender(d, browser, make(1_000_000), chunk, `${tag}-long`);
      figures.push({
        name,
        value: round(long.ms),
        unit: "ms",
        floor: round(floor.ms),
        floor_note: `the longest render while a 20 kB ${what} streams the same way`,
        chars: 1_000_000,
        deltas: 1_000_000 / chunk,
        commits: long.commits,
        max_render_streaming_ms: round(long.streamingMs),
        loadavg_1m: round(loadavg()[0]!),
      });
    };
    await renderFigure("ui.stream_1mb_markdown.max_render_ms", "answer", longAnswer, 1_000, "ui-bench");
    await renderFigure("ui.stream_1mb_code_block.max_render_ms", "code block", codeAnswer, 50, "ui-bench-code");
  } finally {
    await browser.close();
    await d.stop();
  }
  return figures;
};
