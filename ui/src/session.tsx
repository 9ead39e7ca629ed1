/**
 * The session view: chats, the transcript (streamed text, reasoning, tool cards, input
 * requests) and the composer (send, cancel, steering/queued messages). Every user action is an
 * AHP `dispatchAction`; state changes only when the daemon's echo arrives.
 */
import { Component } from "preact";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import type { AhpClient, Json } from "./ahp.js";
import { Clipped } from "./clipped.js";
import { Markdown } from "./markdown.js";
import { visibleControls } from "../../src/core/visible-controls.js";
import { sessionBits, statusLabel, type Chat, type Model, type Part, type SessionState, type Turn } from "./model.js";

const text = (v: unknown): string => (typeof v === "string" ? v : v && typeof v === "object" && "markdown" in v ? String((v as Json).markdown) : "");
const prettyJson = (s: unknown): string => {
  if (typeof s !== "string") return "";
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch {
    return s;
  }
};
/**
 * Puts the keyboard focus in the message box of the session `from` (the button answered) is in. Answered, an approval's
 * or a question's buttons go away, and the focus went with them to the page's body: the next message needed the mouse.
 */
const focusPrompt = (from: EventTarget | null): void => (from as Element | null)?.closest(".session")?.querySelector<HTMLTextAreaElement>(".composer textarea")?.focus();
/** A tool card's text (the model chose it): controls shown, never obeyed (core/visible-controls.ts). */
const shown = (v: unknown): string => visibleControls(typeof v === "string" ? v : text(v));

function ToolCard({ tc, turnId, chat, client }: { tc: Json; turnId: string; chat: string; client: AhpClient }) {
  // A completed call whose result failed (`success: false`) says so: "completed" in green read as success.
  const status = tc.status === "completed" && tc.success === false ? "failed" : String(tc.status);
  const pending = status === "pending-confirmation";
  // Computed once per change of what they show: the card renders again with every frame of its turn.
  const output = useMemo(
    () => (Array.isArray(tc.content) ? (tc.content as Json[]).map((c) => (typeof c.text === "string" ? c.text : "")).join("\n") : ""),
    [tc.content],
  );
  const input = useMemo(() => prettyJson(tc.toolInput), [tc.toolInput]);
  // Not sent (no connection): the buttons stay, and so does the focus, to try again.
  const confirm = (approved: boolean, e: Event) => {
    const sent = client.dispatch(chat, {
      type: "chat/toolCallConfirmed",
      turnId,
      toolCallId: tc.toolCallId,
      approved,
      ...(approved ? { confirmed: "user-action" } : { reason: "denied" }),
    });
    if (sent) focusPrompt(e.currentTarget);
  };
  return (
    <details class={`tool tool-${status}`} open={pending} data-tool={String(tc.toolCallId)}>
      <summary>
        <span class="tool-name">{shown(String(tc.displayName ?? tc.toolName))}</span>
        <span class={`badge st-${status}`}>{status === "cancelled" ? `${status} (${String(tc.reason ?? "")})` : status}</span>
        {tc.invocationMessage ? <span class="tool-msg">{shown(tc.invocationMessage)}</span> : null}
      </summary>
      {tc.toolInput ? (
        <div class="tool-sec">
          <div class="label">Input</div>
          <Clipped text={input} />
        </div>
      ) : null}
      {output || tc.pastTenseMessage ? (
        <div class="tool-sec">
          <div class="label">Output</div>
          <Clipped text={output || text(tc.pastTenseMessage)} />
        </div>
      ) : null}
      {tc.error ? <Clipped tag="div" class="err" text={String((tc.error as Json).message)} /> : null}
      {pending ? (
        <div class="actions" role="group" aria-label="Tool confirmation">
          <button class="approve" onClick={(e) => confirm(true, e)}>
            Approve
          </button>
          <button class="deny" onClick={(e) => confirm(false, e)}>
            Deny
          </button>
        </div>
      ) : null}
    </details>
  );
}

function InputRequest({ part, chat, client }: { part: Part; chat: string; client: AhpClient }) {
  const req = part.request!;
  const questions = (req.questions as Json[] | undefined) ?? [];
  const [vals, setVals] = useState<Record<string, string | boolean | string[]>>({});
  if (part.response !== undefined) return <div class="input-done">Input {part.response === "accept" ? "answered" : part.response}: {text(req.message)}</div>;
  const answer = (response: "accept" | "decline", from: EventTarget | null) => {
    const answers: Json = {};
    for (const q of questions) {
      const id = String(q.id);
      const v = vals[id];
      if (v === undefined) continue;
      const kind = String(q.kind);
      const value =
        kind === "single-select" ? { kind: "selected", value: v } : kind === "multi-select" ? { kind: "selectedMany", value: v } : kind === "boolean" ? { kind: "boolean", value: v } : kind === "number" || kind === "integer" ? { kind: "number", value: Number(v) } : { kind: "text", value: v };
      answers[id] = { state: "submitted", value };
    }
    if (client.dispatch(chat, { type: "chat/inputCompleted", requestId: req.id, response, ...(response === "accept" ? { answers } : {}) })) focusPrompt(from);
  };
  return (
    <form class="input-req" onSubmit={(e) => (e.preventDefault(), answer("accept", e.currentTarget))}>
      {req.message ? <div class="label">{text(req.message)}</div> : null}
      {questions.map((q) => {
        const id = String(q.id);
        const opts = (q.options as Json[] | undefined) ?? [];
        return (
          <label key={id} class="q">
            <span>{String(q.message)}</span>
            {q.kind === "boolean" ? (
              <input type="checkbox" onChange={(e) => setVals({ ...vals, [id]: (e.target as HTMLInputElement).checked })} />
            ) : opts.length ? (
              <select onChange={(e) => setVals({ ...vals, [id]: (e.target as HTMLSelectElement).value })}>
                <option value="">—</option>
                {opts.map((o) => (
                  <option key={String(o.id)} value={String(o.id)}>
                    {String(o.label)}
                  </option>
                ))}
              </select>
            ) : (
              <input type={q.kind === "number" || q.kind === "integer" ? "number" : "text"} onInput={(e) => setVals({ ...vals, [id]: (e.target as HTMLInputElement).value })} />
            )}
          </label>
        );
      })}
      <div class="actions">
        <button type="submit" class="approve">
          Submit
        </button>
        <button type="button" class="deny" onClick={(e) => answer("decline", e.currentTarget)}>
          Decline
        </button>
      </div>
    </form>
  );
}

function PartView({ part, turnId, chat, client }: { part: Part; turnId: string; chat: string; client: AhpClient }) {
  switch (part.kind) {
    case "markdown":
      return <Markdown src={part.content ?? ""} />;
    case "reasoning":
      return (
        <details class="reasoning">
          <summary>Reasoning</summary>
          <div class="reasoning-body">{part.content}</div>
        </details>
      );
    case "toolCall":
      return <ToolCard tc={part.toolCall!} turnId={turnId} chat={chat} client={client} />;
    case "inputRequest":
      return <InputRequest part={part} chat={chat} client={client} />;
    case "error":
      return <Clipped tag="div" class="err" text={part.error?.message ?? "error"} />;
    default:
      return null;
  }
}

function TurnView({ turn, chat, client, active }: { turn: Turn; chat: string; client: AhpClient; active: boolean; rev?: number }) {
  return (
    <article class={`turn ${active ? "active" : `done st-${turn.state}`}`} data-turn={turn.id}>
      <div class="user-msg">{turn.message.text}</div>
      <div class="assistant">
        {turn.responseParts.map((p, i) => (
          <PartView key={p.id ?? String(p.toolCall?.toolCallId ?? i)} part={p} turnId={turn.id} chat={chat} client={client} />
        ))}
        {active ? <div class="typing" aria-label="Assistant is working" /> : null}
        {turn.state === "cancelled" ? <div class="turn-end">Cancelled</div> : null}
      </div>
    </article>
  );
}
/**
 * A turn in the transcript. Completed turns never change (the model appends new objects), so they render once; the
 * active turn is mutated in place and renders with every change. The active turn and the completed turn it becomes
 * are one list entry (same key, same component), so completing keeps what is on the page: it used to mount the turn
 * anew, which rendered a long answer from nothing in one frame (0.7 s for 1 MB) and closed what the user had opened.
 */
class TurnEntry extends Component<{ turn: Turn; chat: string; client: AhpClient; active: boolean; rev?: number }> {
  override shouldComponentUpdate(next: { turn: Turn; active: boolean }): boolean {
    return next.active || next.active !== this.props.active || next.turn !== this.props.turn;
  }
  override render() {
    return <TurnView {...this.props} />;
  }
}

function Composer({ chat, client }: { chat: Chat; client: AhpClient }) {
  const [draft, setDraft] = useState("");
  const box = useRef<HTMLTextAreaElement>(null);
  const [mode, setMode] = useState<"queued" | "steering">("queued");
  // A session (or chat) just opened: the next thing typed is its message, so the box takes the focus (it stayed on
  // the list entry or the New session dialog's button, which went away, leaving it on the page's body). A layout
  // effect: the box has the focus as soon as it is on the page, so a key pressed in the next frame reaches it (after
  // paint, it went to the list entry, and a test that checked the focus once the box showed failed now and then).
  useLayoutEffect(() => box.current?.focus({ preventScroll: true }), [chat.resource]);
  const active = chat.activeTurn;
  const message = (t: string) => ({ text: t, origin: { kind: "user" } });
  const send = () => {
    const t = draft.trim();
    if (!t) return;
    const ok = active
      ? client.dispatch(chat.resource, { type: "chat/pendingMessageSet", kind: mode, id: crypto.randomUUID(), message: message(t) })
      : client.dispatch(chat.resource, { type: "chat/turnStarted", turnId: crypto.randomUUID(), startedAt: new Date().toISOString(), message: message(t) });
    if (!ok) return;
    setDraft("");
    // Sent with the Send button (a click, or Tab then Enter), the focus stayed on it: the next message is typed here.
    box.current?.focus();
  };
  const pending = [...(chat.steeringMessage ? [{ ...chat.steeringMessage, kind: "steering" }] : []), ...chat.queuedMessages.map((m) => ({ ...m, kind: "queued" }))];
  return (
    <div class="composer">
      {pending.length ? (
        <ul class="pending" aria-label="Pending messages">
          {pending.map((m) => (
            <li key={m.id}>
              <span class="badge">{m.kind}</span> {m.message.text}
            </li>
          ))}
        </ul>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          send();
        }}
      >
        <textarea
          ref={box}
          aria-label="Message"
          placeholder={active ? "Message for after this turn…" : "Ask Berth…"}
          value={draft}
          rows={2}
          onInput={(e) => setDraft((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            // An input method's Enter picks a candidate (isComposing; Safari reports it after compositionend as 229).
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
              e.preventDefault();
              send();
            }
          }}
        />
        <div class="composer-actions">
          {active ? (
            <select aria-label="Delivery" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value as "queued" | "steering")}>
              <option value="queued">Queue</option>
              <option value="steering">Steer</option>
            </select>
          ) : null}
          <button type="submit" class="send">
            {active ? (mode === "queued" ? "Queue" : "Steer") : "Send"}
          </button>
          {active ? (
            <button type="button" class="cancel" onClick={() => client.dispatch(chat.resource, { type: "chat/turnCancelled", turnId: active.id })}>
              Cancel
            </button>
          ) : null}
        </div>
      </form>
    </div>
  );
}

function LoadEarlier({ chat, client, model }: { chat: Chat; client: AhpClient; model: Model }) {
  const [busy, setBusy] = useState(false);
  if (!chat.turnsNextCursor) return null;
  const load = () => {
    setBusy(true);
    client
      .request("fetchTurns", { channel: chat.resource, cursor: chat.turnsNextCursor })
      .catch((e: unknown) => model.notify(`cannot load earlier turns: ${e instanceof Error ? e.message : String(e)}`))
      .finally(() => setBusy(false));
  };
  return (
    <button class="load-earlier" disabled={busy} onClick={load}>
      {busy ? "Loading…" : "Load earlier turns"}
    </button>
  );
}

export function SessionView({ model, client, uri, onBack }: { model: Model; client: AhpClient; uri: string; onBack: () => void }) {
  const session: SessionState | undefined = model.sessionStates.get(uri);
  const summary = model.sessions.get(uri);
  const [chatUri, setChatUri] = useState<string | undefined>(undefined);
  const current = chatUri ?? session?.defaultChat;
  const chat = current ? model.chats.get(current) : undefined;
  const scroller = useRef<HTMLDivElement>(null);

  // (Re)tried whenever the connection comes back, so a session opened while offline still loads.
  const online = model.conn.status === "open";
  useEffect(() => {
    if (online && !model.sessionStates.has(uri)) client.subscribe(uri).then((s) => s && model.applySnapshot(s), (e: unknown) => model.notify(`cannot open session: ${String(e)}`));
  }, [uri, online]);
  useEffect(() => {
    if (online && current && !model.chats.has(current)) client.subscribe(current).then((s) => s && model.applySnapshot(s), (e: unknown) => model.notify(`cannot open chat: ${String(e)}`));
  }, [current, session?.lifecycle, online]);
  // Follow the stream unless the reader scrolled up (a big appended chunk must not unstick it).
  const stick = useRef(true);
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });
  const onScroll = () => {
    const el = scroller.current;
    if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };

  const title = session?.title || summary?.title || "Session";
  // The chat's status as the session state keeps it (`session/chatUpdated` updates it: Error after a failed turn);
  // the chat snapshot's own `status` is only as fresh as the subscription. The session's other chats count too: a
  // turn that failed in one of them reads "error" here (its tab says which).
  const live = session?.chats.find((c) => c.resource === chat?.resource)?.status;
  const status = statusLabel(sessionBits(live ?? chat?.status ?? summary?.status ?? 1, session));
  return (
    <section class="session" aria-label="Session">
      <header class="bar">
        <button class="back" onClick={onBack} aria-label="Back to sessions">
          ←
        </button>
        <h2 class="title">{title}</h2>
        <span class="meta">{session?.provider ?? summary?.provider}</span>
        <span class={`badge st-${chat?.activeTurn ? "running" : status.replace(" ", "-")}`} data-status>
          {chat?.activeTurn ? "running" : session?.lifecycle === "creating" ? "creating" : status}
        </span>
      </header>
      {session && session.chats.length > 1 ? (
        <nav class="chats" aria-label="Chats">
          {session.chats.map((c) => (
            <button key={c.resource} class={c.resource === current ? "on" : ""} onClick={() => setChatUri(c.resource)}>
              {c.title || "Chat"}
              {statusLabel(c.status ?? 0) === "error" ? <span class="badge st-error">error</span> : null}
            </button>
          ))}
        </nav>
      ) : null}
      {session?.lifecycle === "failed" ? <div class="err">Session creation failed: {session.creationError?.message}</div> : null}
      <div class="transcript" ref={scroller} onScroll={onScroll} aria-live="polite">
        {chat ? (
          <>
            <LoadEarlier chat={chat} client={client} model={model} />
            {(chat.activeTurn ? [...chat.turns, chat.activeTurn] : chat.turns).map((t) =>
              t === chat.activeTurn ? (
                <TurnEntry key={t.id} turn={t} chat={chat.resource} client={client} active={true} rev={chat.rev} />
              ) : (
                <TurnEntry key={t.id} turn={t} chat={chat.resource} client={client} active={false} />
              ),
            )}
            {chat.turns.length === 0 && !chat.activeTurn ? <p class="empty">No messages yet.</p> : null}
          </>
        ) : (
          <p class="empty">{session?.lifecycle === "creating" ? "Starting the session…" : "Loading…"}</p>
        )}
      </div>
      {chat ? <Composer chat={chat} client={client} /> : null}
    </section>
  );
}
