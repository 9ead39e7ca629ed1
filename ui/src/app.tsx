/**
 * The shell: connection banner, session list (live), new-session form, and the opened session.
 * On a narrow screen only one of list and session is shown at a time.
 */
import { useEffect, useLayoutEffect, useState } from "preact/hooks";
import { NOT_PROVEN, type AhpClient } from "./ahp.js";
import { sessionBits, statusLabel, type Model, type SessionSummary } from "./model.js";
import { SessionView } from "./session.js";
import { directoryUri } from "../../src/core/dir-uri.js";

function ago(iso: string | undefined, now: number): string {
  if (!iso) return "";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

function SessionList({ model, selected, onOpen, onNew }: { model: Model; selected?: string | undefined; onOpen: (uri: string) => void; onNew: () => void }) {
  const items = [...model.sessions.values()].sort((a, b) => String(b.modifiedAt ?? "").localeCompare(String(a.modifiedAt ?? "")));
  const now = Date.now();
  useLayoutEffect(() => {
    if (model.perf.listPaintedMs < 0 && model.conn.everOpen) {
      model.perf.listPaintedMs = performance.now();
      performance.mark("berth:list-painted");
    }
  });
  return (
    <nav class="list" aria-label="Sessions">
      <header class="bar">
        <h1>Sessions</h1>
        <button class="new" onClick={onNew}>
          New session
        </button>
      </header>
      {items.length === 0 && model.conn.everOpen ? <p class="empty">No sessions yet.</p> : null}
      <ul>
        {items.map((s: SessionSummary) => {
          const st = statusLabel(sessionBits(s.status, model.sessionStates.get(s.resource)));
          return (
            <li key={s.resource}>
              <button class={`item ${s.resource === selected ? "on" : ""}`} onClick={() => onOpen(s.resource)} data-session={s.resource}>
                <span class="item-title">{s.title || "Untitled session"}</span>
                <span class={`badge st-${st.replace(" ", "-")}`}>{st}</span>
                <span class="item-meta">
                  {s.provider} · {ago(s.modifiedAt, now)}
                </span>
              </button>
            </li>
          );
        })}
      </ul>
    </nav>
  );
}

function NewSession({ model, client, onCreated, onClose }: { model: Model; client: AhpClient; onCreated: (uri: string) => void; onClose: () => void }) {
  const [provider, setProvider] = useState(model.agents[0]?.provider ?? "");
  const [dir, setDir] = useState("");
  const [modelId, setModelId] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const agent = model.agents.find((a) => a.provider === provider);
  const submit = async () => {
    const uri = `ahp-session:/${crypto.randomUUID()}`;
    const params: Record<string, unknown> = { channel: uri };
    if (provider) params.provider = provider;
    if (dir.trim()) {
      const wd = directoryUri(dir);
      if (!wd.ok) return setError(wd.error);
      params.workingDirectories = [wd.uri];
    }
    setBusy(true);
    setError("");
    if (modelId) params.config = { model: { provider, id: modelId } };
    try {
      await client.request("createSession", params);
      onCreated(uri);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="dialog-wrap">
      <form
        class="dialog"
        role="dialog"
        aria-label="New session"
        onSubmit={(e) => {
          e.preventDefault();
          void submit();
        }}
      >
        <h2>New session</h2>
        <label>
          Provider
          <select value={provider} onChange={(e) => setProvider((e.target as HTMLSelectElement).value)}>
            {model.agents.map((a) => (
              <option key={a.provider} value={a.provider}>
                {a.displayName || a.provider}
              </option>
            ))}
          </select>
        </label>
        <label>
          Working directory
          <input placeholder="/path/to/project (default: the daemon's)" value={dir} onInput={(e) => setDir((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Model
          <select value={modelId} onChange={(e) => setModelId((e.target as HTMLSelectElement).value)}>
            <option value="">Default</option>
            {(agent?.models ?? []).map((m) => (
              <option key={m.id} value={m.id}>
                {m.name || m.id}
              </option>
            ))}
          </select>
        </label>
        {error ? <div class="err">{error}</div> : null}
        <div class="actions">
          <button type="submit" class="approve" disabled={busy || model.conn.status !== "open"}>
            Create
          </button>
          <button type="button" onClick={onClose}>
            Close
          </button>
        </div>
      </form>
    </div>
  );
}

export function App({ model, client }: { model: Model; client: AhpClient }) {
  const [, setTick] = useState(0);
  const rerender = () => setTick((n) => n + 1);
  const [open, setOpen] = useState<string | undefined>(undefined);
  const [creating, setCreating] = useState(false);
  useEffect(() => model.subscribe(rerender), []);
  // A session removed elsewhere closes its view.
  if (open && model.removed.has(open)) queueMicrotask(() => setOpen(undefined));
  useLayoutEffect(() => model.committed());
  const conn = model.conn;
  return (
    <div class={`app ${open ? "has-session" : ""}`}>
      {conn.status !== "open" ? (
        <div class={`banner ${conn.everOpen ? "lost" : ""}`} role="status" data-conn={conn.status}>
          {conn.everOpen
            ? `Disconnected from the daemon${conn.detail ? ` (${conn.detail})` : ""}: reconnecting…`
            : conn.status === "closed" && conn.detail === NOT_PROVEN
              ? "The token in this page's address is not the daemon's, so the page did not connect: open the URL `berth daemon` printed (it ends in #token=…), or run `berth open`."
              : conn.status === "closed"
              ? "Cannot reach the daemon: check that it is running and that this page was opened with the URL it printed (or `berth open`). Retrying…"
              : "Connecting to the daemon…"}
        </div>
      ) : null}
      <SessionList model={model} selected={open} onOpen={setOpen} onNew={() => setCreating(true)} />
      <main class="main">
        {open ? (
          <SessionView key={open} model={model} client={client} uri={open} onBack={() => setOpen(undefined)} />
        ) : (
          <p class="empty hint">Choose a session, or create one.</p>
        )}
      </main>
      {creating ? (
        <NewSession
          model={model}
          client={client}
          onClose={() => setCreating(false)}
          onCreated={(uri) => {
            setCreating(false);
            setOpen(uri);
          }}
        />
      ) : null}
      <div class="notices" aria-live="assertive">
        {model.notices.map((n) => (
          <div key={n.id} class="notice">
            {n.text}
          </div>
        ))}
      </div>
    </div>
  );
}
