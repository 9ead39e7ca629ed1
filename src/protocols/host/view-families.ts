/**
 * One entry point for the session and chat families of status-flags.ts, working-dirs.ts and
 * chat-drafts.ts, from both sides: a backend's v6 `resource_action` (mcp-lifecycle.ts routes it
 * here first) and a client's `dispatchAction` (ahp-actions.ts asks here first). Each function
 * answers `undefined` for an action that is none of these families, so the caller goes on as before.
 */
import type { Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { backendChatFlag, backendStatusFlag, clientChatFlag, clientStatusFlag, isChatFlagAction, isStatusFlagAction } from "./status-flags.js";
import { backendChatWorkingDir, backendWorkingDir, clientChatWorkingDir, clientWorkingDir, isChatWorkingDirAction, isWorkingDirAction } from "./working-dirs.js";
import { CHAT_DRAFT_ACTIONS, chatDraftAction } from "./chat-drafts.js";
import { CHAT_09_ACTIONS, backendChat09, backendChatsReordered, clientChat09 } from "./chat-09.js";

/** A backend `resource_action` on `channel` (the session or one of its chats): null published, a refusal, or undefined (not ours). */
export function viewResourceAction(st: HostState, s: SessionModel, channel: string, action: Json): string | null | undefined {
  const type = action.type;
  if (channel === s.uri) {
    if (isStatusFlagAction(type)) return backendStatusFlag(st, s, action);
    if (isWorkingDirAction(type)) return backendWorkingDir(st, s, action);
    if (type === "session/chatsReordered") return backendChatsReordered(st, s, action); // chat-09.ts
    return undefined;
  }
  const chat = st.chatIndex.get(channel);
  if (!chat || chat.sessionUri !== s.uri) return undefined;
  if (isChatFlagAction(type)) return backendChatFlag(st, chat, action);
  if (isChatWorkingDirAction(type)) return backendChatWorkingDir(st, s, chat, action);
  if (CHAT_09_ACTIONS.has(type as string)) return backendChat09(st, chat, action); // chat-09.ts
  return undefined;
}

/** A client's `dispatchAction`: true when one of these families handled it (published or rejected). */
export function viewClientAction(st: HostState, channel: string, action: Json, origin: Origin, reject: (r: string) => void): boolean {
  const type = action.type;
  const session = st.sessions.get(channel);
  if (session) {
    if (isStatusFlagAction(type)) clientStatusFlag(st, session, action, origin, reject);
    else if (isWorkingDirAction(type)) clientWorkingDir(st, session, action, origin, reject);
    else return false;
    return true;
  }
  const chat = st.chatIndex.get(channel);
  const s = chat ? st.sessions.get(chat.sessionUri) : undefined;
  if (!chat || !s) return false;
  if (CHAT_DRAFT_ACTIONS.has(type as string)) chatDraftAction(st, s, chat, action, origin, reject);
  else if (isChatFlagAction(type)) clientChatFlag(st, chat, action, origin, reject);
  else if (isChatWorkingDirAction(type)) clientChatWorkingDir(st, s, chat, action, origin, reject);
  else if (CHAT_09_ACTIONS.has(type as string)) clientChat09(st, s, chat, action, origin, reject);
  else return false;
  return true;
}
