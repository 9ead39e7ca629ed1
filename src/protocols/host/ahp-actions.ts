/**
 * Client-dispatched AHP actions and the backend commands they map to. Contracts:
 *  - an invalid action is echoed with `rejectionReason` (and the client's `origin`);
 *  - `chat/turnStarted` is reduced before `prompt` is sent; a refused or indeterminate prompt
 *    ends that turn with `chat/error` (`backend_rejected` / `backend_indeterminate`);
 *  - `chat/turnCancelled` is reduced immediately and sends `abort`;
 *  - tool confirmations, pending messages (`steer` / `follow_up`, pending-messages.ts) and session
 *    configuration (`configure`) are echoed only after the backend accepts; a refusal or an indeterminate
 *    outcome is echoed as a rejection and nothing is replayed;
 *  - `chat/inputCompleted` is reduced only when the runtime's `input_resolved` arrives.
 */
import { randomUUID } from "node:crypto";
import { clip } from "./inbound.js";
import { isManagedRoute } from "./managed-invocations.js";
import { managedAdmission, managedPrompt, managedStop } from "./managed-actions.js";
import { pendingMessageSet } from "./pending-messages.js";
import { retainPrompt } from "./reconcile.js";
import { viewClientAction } from "./view-families.js";
import { DispatchActionParams } from "./ahp-params.js";
import { refusal, routeCommand } from "./ahp-requests.js";
import { chatErrorAction, durationSince, findTool, type ChatModel, type Json, type Origin, type SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { mcpLifecycleRequest } from "./mcp-lifecycle.js";
import { mcpBackgroundRequest } from "./mcp-background.js";
import { annotationsClientAction, changesetClientAction } from "./resources.js";
import { cancelAuthRequiredTool } from "./resource-actions.js";
import { activeClientAction, clientToolAction } from "./client-tools.js";
import { clientToggle } from "./customization-toggles.js";
import { NOT_CONNECTED_REFUSAL, hostRefused } from "./commands.js";


/** Handle one `dispatchAction` notification from client `clientId` on connection `conn` (the owner of what it sets). */
export function dispatchClientAction(st: HostState, clientId: string, params: Json, conn?: object): void {
  const p = DispatchActionParams.safeParse(params);
  if (!p.success) return;
  const { channel, clientSeq, action } = p.data;
  const origin: Origin = { clientId, clientSeq };
  const reject = (reason: string) => void st.publish(channel, action, origin, reason);
  // Status flags, working directories, drafts (view-families.ts).
  if (viewClientAction(st, channel, action, origin, reject)) return;
  const type = action.type;
  const session = st.sessions.get(channel);
  if (session) {
    if (type === "session/activeClientSet" || type === "session/activeClientRemoved") return activeClientAction(st, session, action, origin, conn, reject);
    return sessionAction(st, session, action, origin, reject);
  }
  if (channel.startsWith("ahp-changeset:")) return changesetClientAction(st, channel, action, origin, reject);
  if (channel.startsWith("ahp-session:/") && channel.endsWith("/annotations")) return annotationsClientAction(st, channel, action, origin, reject);
  const chat = st.chatIndex.get(channel);
  if (!chat) return; // upstream: an action for a non-existent channel is silently ignored (no echo)
  const s = st.sessions.get(chat.sessionUri)!;
  switch (type) {
    case "chat/turnStarted":
      return turnStarted(st, s, chat, action, origin, reject);
    case "chat/turnCancelled": {
      const t = chat.activeTurn;
      if (!t || t.id !== action.turnId) return reject("no such active turn");
      if (!s.route && t.restored === true) {
        // A turn restored after a host restart that no runtime serves now: the client may end it here
        // (a runtime that comes back with it has its trailing output drained); nothing is sent.
        st.publish(channel, { type, turnId: t.id, duration: durationSince(t) }, origin);
        chat.draining = true;
        st.summaryChanged(s);
        return;
      }
      if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
      if (isManagedRoute(s.route)) return managedStop(st, s, chat, t.id, origin, reject);
      st.publish(channel, { type, turnId: t.id, duration: durationSince(t) }, origin);
      chat.draining = true;
      st.summaryChanged(s);
      void routeCommand(st, s, channel, { type: "abort" });
      return;
    }
    case "chat/toolCallConfirmed":
    case "chat/toolCallResultConfirmed":
      return toolConfirmation(st, s, chat, action, origin, reject);
    case "chat/inputCompleted":
      return inputCompleted(st, s, chat, action, origin, reject);
    case "chat/toolCallComplete":
      if (clientToolAction(st, s, chat, action, origin, conn, reject)) return;
      return cancelAuthRequiredTool(st, s, chat, action, origin, reject);
    case "chat/toolCallContentChanged":
      if (clientToolAction(st, s, chat, action, origin, conn, reject)) return;
      return reject("chat/toolCallContentChanged from a client is accepted only for a tool call executed by that client");
    case "chat/pendingMessageSet":
      return pendingMessageSet(st, s, chat, action, origin, reject);
    case "chat/pendingMessageRemoved": {
      const has = action.kind === "steering" ? chat.steeringMessage?.id === action.id : chat.queuedMessages.some((m) => m.id === action.id);
      if (!has) return reject("no pending message with that id and kind");
      return reject("the backend protocol cannot withdraw a pending message");
    }
    default:
      return reject(`unsupported action ${clip(type)}`);
  }
}

function sessionAction(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  if (action.type === "session/titleChanged") {
    if (typeof action.title !== "string") return reject("invalid session/titleChanged");
    return st.setTitle(s, action.title, origin);
  }
  if (action.type === "session/mcpServerStartRequested" || action.type === "session/mcpServerStopRequested") return mcpLifecycleRequest(st, s, action, origin, reject);
  if (action.type === "session/customizationToggled") return clientToggle(st, s, action, origin, reject);
  if (action.type === "session/mcpServerBackgroundRequested") return mcpBackgroundRequest(st, s, action, origin, reject);
  if (action.type !== "session/configChanged") return reject(`unsupported action ${clip(action.type)}`);
  // `configure`: only `model` ({provider, id}) and `thinkingLevel` are session-mutable here.
  const cfg = action.config;
  if (!cfg || typeof cfg !== "object" || Array.isArray(cfg)) return reject("config must be an object");
  const config = cfg as Json;
  const command: Json = { type: "configure" };
  for (const [k, v] of Object.entries(config)) {
    if (k === "model") {
      const m = v as Json | null;
      if (!m || typeof m !== "object" || typeof m.provider !== "string" || typeof m.id !== "string" || m.provider.length > 256 || m.id.length > 256)
        return reject("model must be {provider, id}");
      command.model = { provider: m.provider, id: m.id };
    } else if (k === "thinkingLevel") {
      if (typeof v !== "string" || v.length === 0 || v.length > 64) return reject("thinkingLevel must be a short string");
      command.thinkingLevel = v;
    } else return reject(`config property ${clip(k)} is not session-mutable`);
  }
  if (Object.keys(command).length === 1) return reject("nothing to configure");
  if (action.replace !== undefined && typeof action.replace !== "boolean") return reject("replace must be a boolean");
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  void routeCommand(st, s, s.primaryChat, command, (o) => {
    if (o.kind !== "accepted") return reject(refusal(o));
    if (!st.sessions.has(s.uri)) return;
    const config: Json = { ...command };
    delete config.type;
    const echo: Json = { type: "session/configChanged", config };
    if (action.replace === true) echo.replace = true;
    st.publish(s.uri, echo, origin);
  });
}

function turnStarted(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const msg = action.message as Json | undefined;
  if (typeof action.turnId !== "string" || !msg || typeof msg.text !== "string") return reject("invalid chat/turnStarted");
  if ((msg.origin as Json | undefined)?.kind !== "user") return reject("clients may only send user messages");
  if (chat.interactivity === "read-only") return reject("chat is read-only");
  // A turn ID names one turn: a `chat/turnStarted` resent after a dropped connection (its echo, with the client's
  // origin, is in the replay or the snapshot) must not run the prompt a second time.
  if (chat.activeTurn?.id === action.turnId || chat.turns.some((t) => t.id === action.turnId))
    return reject(`turn ${clip(action.turnId)} was already started in this chat (a resent prompt is not run twice); send a new turnId for a new prompt`);
  if (chat.activeTurn) return reject("a turn is already in progress");
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  const managed = isManagedRoute(s.route);
  const refused = managed ? managedAdmission(s) : null;
  if (refused) return reject(refused);
  const turnId = action.turnId;
  const channel = chat.uri;
  st.publish(channel, { type: "chat/turnStarted", turnId, startedAt: new Date().toISOString(), message: { text: msg.text, origin: { kind: "user" } } }, origin);
  st.summaryChanged(s);
  if (managed) return managedPrompt(st, s, chat, msg.text, turnId, origin);
  const commandId = randomUUID();
  retainPrompt(s, commandId, channel, turnId);
  void routeCommand(st, s, channel, { type: "prompt", text: msg.text, turnId }, (o) => {
    if (o.kind === "accepted") return;
    const cur = st.chatIndex.get(channel);
    if (!cur?.activeTurn || cur.activeTurn.id !== turnId) return;
    const errorType = o.kind === "rejected" ? "backend_rejected" : "backend_indeterminate";
    st.publish(channel, chatErrorAction(turnId, durationSince(cur.activeTurn), errorType, o.kind === "rejected" && o.notSent ? hostRefused(o.error) : o.error));
    if (o.kind === "indeterminate") cur.draining = true; // the runtime may still be running it
    st.summaryChanged(s);
  }, commandId);
}

function toolConfirmation(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const type = action.type as string;
  const t = chat.activeTurn;
  const tc = t && t.id === action.turnId && typeof action.toolCallId === "string" ? findTool(t, action.toolCallId) : undefined;
  const want = type === "chat/toolCallConfirmed" ? "pending-confirmation" : "pending-result-confirmation";
  if (!tc || tc.status !== want) return reject("tool call is not awaiting that confirmation");
  if (typeof action.approved !== "boolean") return reject("approved must be a boolean");
  if (!s.route || s.route.version < 4) return reject("backend cannot arbitrate tool confirmations");
  const decision: Json = { ...action };
  delete decision.type;
  const channel = chat.uri;
  void routeCommand(st, s, channel, { type: type === "chat/toolCallConfirmed" ? "confirm_tool" : "confirm_tool_result", ...decision }, (o) => {
    if (o.kind !== "accepted") return reject(refusal(o));
    const cur = st.chatIndex.get(channel)?.activeTurn;
    const still = cur && cur.id === action.turnId ? findTool(cur, action.toolCallId as string) : undefined;
    if (!still || still.status !== want) return; // the runtime already resolved it authoritatively
    const echo: Json = { type, turnId: action.turnId, toolCallId: action.toolCallId, approved: action.approved };
    if (type === "chat/toolCallConfirmed") {
      if (action.approved) echo.confirmed = typeof action.confirmed === "string" ? action.confirmed : "user-action";
      else echo.reason = action.reason === "skipped" ? "skipped" : "denied";
      for (const k of ["editedToolInput", "selectedOptionId", "reasonMessage"]) if (action[k] !== undefined) echo[k] = action[k];
    }
    st.publish(channel, echo, origin);
    const key = `tool:${String(action.toolCallId)}`;
    if (s.inputNeeded.has(key)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
    st.summaryChanged(s);
  });
}

function inputCompleted(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const requestId = action.requestId;
  if (typeof requestId !== "string" || !chat.inputs.has(requestId)) return reject("no such pending input request");
  if (!["accept", "decline", "cancel"].includes(action.response as string)) return reject("invalid response");
  if (!s.route || s.route.version < 2 || !s.route.inputCapable) return reject("backend cannot complete input");
  if (!s.inputAvailable) return reject("source input authority unavailable");
  const route = s.route;
  const frame: Json = { type: "command", backendInstanceId: route.instanceId, session: s.uri, command: { type: "complete_input", requestId, response: action.response, answers: action.answers ?? {} } };
  if (route.version >= 3) frame.chat = chat.uri;
  let commandId = "";
  commandId = st.sendCommand(route, frame, (o) => {
    if (o.kind === "accepted") return; // reduced when the runtime emits input_resolved
    st.inputOrigins.delete(commandId);
    reject(refusal(o));
  });
  st.inputOrigins.set(commandId, origin);
}
