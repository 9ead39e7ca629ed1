/**
 * Backend event ingress (`event`, `chat_event`, `sequenced_event`): which logical route a frame speaks
 * for, sequenced publication, and logical failure isolation (spec "Sequenced publication and logical
 * failure isolation"). Contracts:
 *  - a sequenced event is applied exactly once, in order, and acknowledged only after it was applied;
 *    a gap answers `event_resync_required`, an accepted sequence is re-ACKed only while its route is current;
 *  - a semantic rejection answers `event_rejected` naming the route's logical generation and retires
 *    only that route (a dedicated connection is closed); on a v10+ multiplexed route an unsequenced
 *    event's refusal is one too (`sequence: 0`), elsewhere it is a non-fatal `validation_error`;
 *  - a frame naming another generation than the current one is refused without touching the current route;
 *  - a tool result whose output is over MAX_TEXT is refused like any invalid event, and the one thing published is
 *    the call's end for AHP clients (failed, naming the bound), so no client's tool call stays "running";
 *  - likewise a text or thinking delta over MAX_TEXT: the one thing published is a note in the active turn's answer
 *    naming the bound, so no client's answer silently misses the refused text.
 */
import { BackendEvent, EVENT_MIN_VERSION, MAX_TEXT, zodMessage } from "./backend-schema.js";
import { clip } from "./inbound.js";
import type { ChatModel, Json, SessionModel } from "./model.js";
import type { BackendConn } from "./backend-conn.js";
import type { LogicalRoute } from "./logical-route.js";
import { MANAGED_EVENT_TYPES } from "./managed-schema.js";
import { applyManagedEvent } from "./managed-invocations.js";
import { beforeNativeEvent } from "./reconcile.js";
import { applySourceEvent } from "./source-events.js";
import { noteRefusedDelta } from "./backend-events.js";
import { resourceAction } from "./mcp-lifecycle.js";
import { resourceSnapshotEvent } from "./resources.js";

/** One event frame from `conn`, sequenced or not. */
export function onEvent(conn: BackendConn, f: Json, sequenced: boolean): void {
  const session = f.session;
  if (typeof session !== "string") return conn.error("validation_error", "event needs a session URI");
  const suppliedId = typeof f.backendConnectionId === "string" ? f.backendConnectionId : undefined;
  const seq = f.sequence;
  if (sequenced && (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 1))
    return conn.error("validation_error", "sequence must be a positive integer", echoId({ session }, suppliedId));

  // Resolve the logical route this frame speaks for.
  let route: LogicalRoute | undefined;
  if (conn.kind === "session") {
    route = conn.route;
    if (!route || route.sessionUri !== session) return conn.error("authority_error", "session is not owned by this connection", { session, sequence: sequenced ? seq : 0 });
    if (suppliedId !== undefined && suppliedId !== route.logicalId)
      return void conn.send({ type: "event_epoch_mismatch", session, sequence: sequenced ? seq : 0, backendConnectionId: suppliedId });
  } else {
    if (suppliedId !== undefined) {
      route = conn.epochs.get(suppliedId);
      if (!route || route.sessionUri !== session)
        return void conn.send({ type: "event_epoch_mismatch", session, sequence: sequenced ? seq : 0, backendConnectionId: suppliedId });
      // The failed epoch stays fenced until its session registers again; then its ID is an old one.
      if (route.retired === "rejected" && conn.epochs.latest(session) === route)
        return void conn.send({ type: "event_rejected", session, sequence: sequenced ? seq : 0, backendConnectionId: suppliedId, error: "route retired after a rejected event" });
      if (route.retired !== "no" || conn.current.get(session) !== route)
        return void conn.send({ type: "event_epoch_mismatch", session, sequence: sequenced ? seq : 0, backendConnectionId: suppliedId });
    } else {
      route = conn.current.get(session);
      if (!route) {
        // Fenced (retired) or never registered here: refuse without attributing a generation.
        return void conn.send({ type: "event_rejected", session, sequence: sequenced ? seq : 0, error: "no current route for that session on this connection" });
      }
      if (sequenced && route.requireId) return void conn.send({ type: "event_epoch_required", session, sequence: seq });
    }
  }
  if (route.retired !== "no") return void conn.send(echoId({ type: "event_rejected", session, sequence: sequenced ? seq : 0, error: "route retired" }, suppliedId));
  const s = conn.state.sessions.get(session);
  if (!s || s.route !== route) return conn.error("backend_replaced", "this route is no longer current for the session", echoId({ session }, suppliedId));

  if (sequenced) {
    const n = seq as number;
    const receipt = { session, sequence: n, backendConnectionId: route.logicalId };
    if (n < route.nextSeq) return void conn.send({ type: "event_ack", ...receipt });
    if (n > route.nextSeq) return void conn.send({ type: "event_resync_required", session, expectedSequence: route.nextSeq, backendConnectionId: route.logicalId });
    const err = applyEvent(conn, route, s, f, true);
    if (err) return reject(conn, route, n, err);
    route.nextSeq = n + 1;
    conn.sendAck(session, n, route.logicalId);
    return;
  }
  const err = applyEvent(conn, route, s, f, false);
  if (!err) return;
  // v10+ multiplexed: an unsequenced frame cannot bypass the fence, so its refusal retires the route too.
  if (route.multiplexed && route.version >= 10) return reject(conn, route, 0, err);
  conn.error("validation_error", `event refused: ${err}`, echoId({ session, sequence: 0 }, suppliedId));
}

/** A semantic rejection: `event_rejected` naming the route's generation, then only that route is retired. */
function reject(conn: BackendConn, route: LogicalRoute, sequence: number, err: string): void {
  const session = route.sessionUri;
  conn.send({ type: "event_rejected", session, sequence, backendConnectionId: route.logicalId, error: err });
  if (route.multiplexed) {
    conn.current.delete(session);
    conn.detachRoute(route, "rejected");
  } else {
    route.retired = "rejected";
    conn.fatal("validation_error", `semantic rejection: ${err}`);
  }
}

/** Validate and reduce; returns a semantic-rejection message or null. */
function applyEvent(conn: BackendConn, route: LogicalRoute, s: SessionModel, f: Json, sequenced: boolean): string | null {
  const st = conn.state;
  let chat: ChatModel | undefined;
  if (f.type === "chat_event" || (f.chat !== undefined && f.type === "sequenced_event")) {
    if (route.version < 3) return "chat-addressed events require protocol version 3";
    if (typeof f.chat !== "string") return "chat_event needs a chat URI";
    chat = s.chats.get(f.chat);
    if (!chat) return "chat does not belong to the session";
  } else chat = st.chatIndex.get(s.primaryChat);
  if (!chat) return "session has no primary chat";
  const raw = f.event as Json | undefined;
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return "event payload must be an object";
  if (typeof raw.type !== "string") return "event payload needs a string type";
  const min = Object.hasOwn(EVENT_MIN_VERSION, raw.type) ? EVENT_MIN_VERSION[raw.type] : undefined;
  if (min === undefined) return `unknown event type ${clip(raw.type)}`;
  if (route.version < min) return `${String(raw.type)} requires protocol version ${min}`;
  if (min === 2 && !route.inputCapable) return `${String(raw.type)} requires advertised inputCapabilities`;
  if (min === 4 && !route.toolCapable) return `${String(raw.type)} requires advertised toolCapabilities`;
  // v14: "the owning backend's sequenced profile_image_changed"; its event_ack is the durable acknowledgement.
  if (raw.type === "profile_image_changed" && !sequenced) return "profile_image_changed must be a sequenced_event (its event_ack acknowledges the durable change); send it with a sequence";
  // v6 resource frames carry official AHP values, validated by their own module.
  if (raw.type === "resource_action") return resourceAction(st, s, raw);
  if (raw.type === "resource_snapshot") return resourceSnapshotEvent(st, s, raw);
  if (min >= 10) return MANAGED_EVENT_TYPES.has(raw.type) ? applyManagedEvent(st, route, s, chat, raw) : applySourceEvent(st, s, chat, raw);
  if (beforeNativeEvent(st, s, chat, raw.type)) return null;
  // Fast path for the hot streaming events (same rules as the schema: exactly {type, text}).
  if ((raw.type === "text_delta" || raw.type === "thinking_delta") && typeof raw.text === "string" && raw.text.length <= MAX_TEXT) {
    let keys = 0;
    for (const _k in raw) keys++;
    if (keys === 2) return st.applyEvent(s, chat, raw as BackendEvent);
  }
  if ((raw.type === "text_delta" || raw.type === "thinking_delta") && typeof raw.text === "string" && raw.text.length > MAX_TEXT)
    // Refused below as before; the clients' answer must not silently miss the text: it gets a note naming the bound.
    noteRefusedDelta(st, s, chat, raw.type, raw.text.length, MAX_TEXT);
  const over = oversizedToolOutput(raw);
  if (over !== null) {
    // Refused as before, but the client's call must not stay "running": it ends failed, naming the bound.
    const failed = BackendEvent.safeParse({ ...raw, type: "tool_completed", output: `${over}. The backend's output was not kept.`, isError: true });
    if (failed.success) st.applyEvent(s, chat, failed.data);
    return `${over}: bound the tool's output before sending it (the AHP client was told the call failed)`;
  }
  const ev = BackendEvent.safeParse(raw);
  if (!ev.success) return zodMessage(ev.error);
  return st.applyEvent(s, chat, ev.data);
}

/** Why a tool result's `output` is over the per-event text bound, or null when it is not. */
function oversizedToolOutput(raw: Json): string | null {
  if (raw.type !== "tool_completed" && raw.type !== "tool_result_confirmation_requested") return null;
  if (typeof raw.output !== "string" || raw.output.length <= MAX_TEXT) return null;
  return `${raw.type} output is ${raw.output.length} characters; this host accepts at most ${MAX_TEXT} (${MAX_TEXT / (1024 * 1024)} MiB) per event`;
}

/** A reply frame carrying the `backendConnectionId` the sender supplied, when it supplied one. */
function echoId(x: Json, suppliedId: string | undefined): Json {
  return suppliedId !== undefined ? { ...x, backendConnectionId: suppliedId } : x;
}
