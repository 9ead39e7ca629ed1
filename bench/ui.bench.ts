/**
 * Web UI figures in a real headless Chromium (skipped, with a note, where none is installed):
 *  - first paint of the loaded session list, from navigation start, in fresh browser contexts;
 *    floor: a Node client doing the same work over loopback (GET the page and its assets, open
 *    the AHP socket, initialize, listSessions);
 *  - the worst wait of a received-but-unrendered delta while a 20,000-delta answer streams;
 *    floor: how long a Node AHP client takes to receive that same number of deltas.
 */
import { loadavg } from "node:os";
import WebSocket from "ws";
import type { Figure } from "./run.js";
import { AhpClient } from "../test/host/helpers.js";
import { ended, newSession, startTurn } from "../test/host/berth-rig.js";
import { browserSkipReason, launchBrowser, startDaemon } from "../test/ui/rig.js";
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
  } finally {
    await browser.close();
    await d.stop();
  }
  return figures;
};
