/**
 * The web UI's markdown renderer (ui/src/markdown.tsx, bundled here with esbuild as Vite does) in a blank Chromium page,
 * rendered by Preact into the real DOM. `step(src)` renders into one long-lived component (as a streaming answer is
 * rendered, frame after frame); `fresh(src)` into a new one. Preact's `options.vnode` hook counts the elements each
 * render creates, and the length of the text in them: what a frame costs, without a clock.
 */
import { build } from "esbuild";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { REPO_ROOT } from "../helpers/paths.js";

const ENTRY = `
import { h, options, render } from "preact";
import { Markdown } from ${JSON.stringify(join(REPO_ROOT, "ui", "src", "markdown.tsx"))};
let made = 0;
let chars = 0;
const prev = options.vnode;
// Text vnodes carry their string as props: chars counts the text a render laid out anew.
options.vnode = (v) => { made++; if (typeof v.props === "string") chars += v.props.length; if (prev) prev(v); };
const live = document.createElement("div");
document.body.append(live);
const fresh = (src) => {
  const d = document.createElement("div");
  render(h(Markdown, { src }), d);
  const html = d.innerHTML;
  render(null, d);
  return html;
};
const step = (src, html = true) => {
  made = chars = 0;
  render(h(Markdown, { src }), live);
  return { html: html ? live.innerHTML : "", made, chars };
};
// Each src in turn into the long-lived component: the first whose page differs from a fresh render's.
const check = (srcs) => {
  for (let i = 0; i < srcs.length; i++) {
    const got = step(srcs[i]).html;
    const want = fresh(srcs[i]);
    if (got !== want) {
      let at = 0;
      while (got[at] === want[at]) at++;
      return { i, length: srcs[i].length, got: got.slice(at - 80, at + 80), want: want.slice(at - 80, at + 80) };
    }
  }
  return null;
};
globalThis.md = { fresh, step, check };
`;

let bundle: string | undefined;
/** The harness script (built once per process). */
export async function markdownHarness(): Promise<string> {
  bundle ??= (
    await build({
      stdin: { contents: ENTRY, resolveDir: REPO_ROOT, loader: "js" },
      bundle: true,
      write: false,
      format: "iife",
      target: "es2022",
      jsx: "automatic",
      jsxImportSource: "preact",
      logLevel: "error",
    })
  ).outputFiles[0]!.text;
  return bundle;
}

/** `page` (blank) with the harness loaded. */
export async function loadHarness(page: Page): Promise<void> {
  await page.setContent("<!doctype html><body></body>");
  await page.addScriptTag({ content: await markdownHarness() });
}
