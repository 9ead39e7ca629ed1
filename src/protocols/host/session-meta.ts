/**
 * A session's `_meta` side channel and its announcements. Contracts:
 *  - `paratenic.inputAvailable` (boolean) appears once the backend sent an `input_snapshot` (it
 *    is the last snapshot's `available`); it is in the session state and in the session summary;
 *  - `paratenic.identity` (v14 `profile_image_changed`) is in the session state only: the image
 *    bytes never travel in root summaries;
 *  - any change publishes `session/metaChanged` with the complete new `_meta` (the action has
 *    full-replacement semantics) and a summary change with the complete summary `_meta`.
 */
import { ROOT } from "./ahp-constants.js";
import type { Json, SessionModel } from "./model.js";
import type { HostState } from "./state.js";

export const INPUT_AVAILABLE_KEY = "paratenic.inputAvailable";
export const IDENTITY_KEY = "paratenic.identity";

/** The session state's `_meta` (undefined when empty). */
export function sessionMeta(s: SessionModel): Json | undefined {
  const meta: Json = {};
  if (s.inputAvailableReported === true) meta[INPUT_AVAILABLE_KEY] = s.inputAvailable;
  if (s.extra.model) meta["berth.model"] = s.extra.model;
  if (s.extra.identityImage) meta[IDENTITY_KEY] = { image: s.extra.identityImage };
  return Object.keys(meta).length > 0 ? meta : undefined;
}

/** The session summary's `_meta` (undefined when empty). */
export function summaryMeta(s: SessionModel): Json | undefined {
  return s.inputAvailableReported === true ? { [INPUT_AVAILABLE_KEY]: s.inputAvailable } : undefined;
}

/** Announce the session's current `_meta` to session subscribers and its summary `_meta` to root. */
export function announceMeta(st: HostState, s: SessionModel, summaryToo: boolean): void {
  st.publish(s.uri, { type: "session/metaChanged", _meta: sessionMeta(s) ?? {} });
  if (summaryToo) st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { _meta: summaryMeta(s) ?? {} } });
}

/** Record the input authority from an `input_snapshot`; announces it when it changed or is new. */
export function setInputAvailable(st: HostState, s: SessionModel, available: boolean): void {
  const changed = s.inputAvailableReported !== true || s.inputAvailable !== available;
  s.inputAvailable = available;
  if (!changed) return;
  s.inputAvailableReported = true;
  announceMeta(st, s, true);
}
