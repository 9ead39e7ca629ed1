/**
 * Entry: reads the token from the URL fragment (it never leaves this page's memory: no query
 * string, cookie or storage), connects to the daemon that served the page, and renders.
 * The fragment is then removed from the address bar (`history.replaceState`): a URL copied from
 * there, a shared screen or a screenshot does not carry the token. The tab's own history entry
 * keeps it as its state, so a reload of the same tab still works; a new `#token=` URL wins.
 */
import { render } from "preact";
import { AhpClient } from "./ahp.js";
import type { SessionSummary } from "./model.js";
import { App } from "./app.js";
import { Model } from "./model.js";
import "./style.css";

const root = document.getElementById("app")!;
/** What the user did, by the action it sends (for the notice when it could not be sent). */
const NOT_SENT: Record<string, string> = {
  "chat/turnStarted": "Your message",
  "chat/pendingMessageSet": "Your message",
  "chat/turnCancelled": "Cancel",
  "chat/toolCallConfirmed": "Your answer to the tool",
  "chat/inputCompleted": "Your answer",
};
const kept = (history.state as { berthToken?: unknown } | null)?.berthToken;
const token = new URLSearchParams(location.hash.slice(1)).get("token") ?? (typeof kept === "string" ? kept : null);
if (token) history.replaceState({ berthToken: token }, "", location.pathname + location.search);
// The daemon's URL pasted into this tab later (the fix both the no-token page and a wrong-token banner ask for) differs
// from the address bar only in its fragment: the browser does not load the page again, and it kept the token it had
// (or none). A new #token= loads the page again, which then reads it.
addEventListener("hashchange", () => {
  if (new URLSearchParams(location.hash.slice(1)).has("token")) location.reload();
});

if (!token) {
  render(
    <div class="nologin">
      <h1>Berth</h1>
      <p>
        This page needs the daemon's token. Open the URL that <code>berth daemon</code> printed (it ends in <code>#token=…</code>), or run{" "}
        <code>berth open</code>.
      </p>
    </div>,
    root,
  );
} else {
  const model = new Model();
  const refreshList = () =>
    client.request("listSessions", {}).then(
      (r) => model.setSessions((r as { items: SessionSummary[] }).items),
      (e: unknown) => model.notify(`cannot list sessions: ${String(e)}`),
    );
  const client: AhpClient = new AhpClient(token, {
    onInit(snapshots) {
      for (const s of snapshots) model.applySnapshot(s);
      void refreshList();
    },
    onReconnect(r, gone) {
      if (r.type === "replay") for (const e of r.actions) model.envelope(e);
      else for (const s of r.snapshots) model.applySnapshot(s);
      // Removed while the page was away: root/sessionRemoved carries no serverSeq, so no replay brings it, and the
      // open view of a disposed session stayed.
      for (const uri of gone) model.channelGone(uri);
      // Root notifications carry no serverSeq: re-read the list after a gap.
      void refreshList();
    },
    onEnvelope: (e) => model.envelope(e),
    onRootNotification: (m, p) => model.rootNotification(m, p),
    onStatus: (s, d) => model.setConn(s, d),
    onNotSent: (a) => model.notify(`${NOT_SENT[a.type] ?? "That"} was not sent: the page is not connected to the daemon. It reconnects by itself; then try again.`),
  });
  (globalThis as unknown as { __berth: unknown }).__berth = { perf: model.perf };
  client.connect(); // the socket opens while the first render runs
  client.watchLiveness();
  render(<App model={model} client={client} />, root);
  addEventListener("pagehide", () => client.stop());
}
