/**
 * Backend protocol v11–v14: native source snapshots and the agent identity image. This host's
 * interpretation (docs/host.md, "Source reconciliation (v11–v14)"):
 *  - v11 `source_turn {sourceId, active, historyOnly, turn}` reconciles one source turn by
 *    identity: `sourceId` must be the session's registered source; a held closed turn is never
 *    rewritten (re-sending it is a no-op); the live turn's transcript may only be extended; a
 *    closed turn is published whole (start, parts, end in one step), never partially. `registered`
 *    carries `sourceCursors` (the last held turn of every chat) besides `sourceCursor`;
 *  - v12 `source_snapshot_batch {session, batchId, snapshots}` applies snapshots in order, stops
 *    at the first refused one, commits the accepted prefix durably and only then answers
 *    `source_snapshot_batch_ack {batchId, accepted, total, lastTurnId?, error?}`;
 *  - v13 `source_turn_resources {sourceId, active, historyOnly, resources}` carries one snapshot as
 *    ordered immutable `text/plain` resources whose concatenation is the snapshot JSON; each
 *    resource must belong to the session and match its `sha256:` digest, and the decoded
 *    snapshot must agree with the envelope; then the v11 rules apply (no per-turn size limit);
 *  - v14 `profile_image_changed {image | null}` sets or clears the session's identity image
 *    (PNG, JPEG, WebP or GIF; at most IDENTITY_IMAGE_BYTES decoded, IDENTITY_IMAGE_PIXELS a side,
 *    the image's own header must state the declared size: image-header.ts). It is durable before the
 *    event is acknowledged and is published as `paratenic.identity` session metadata (`session/metaChanged`).
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import { MAX_ID_LEN, MAX_TEXT, zodMessage } from "./backend-schema.js";
import { clip } from "./inbound.js";
import { announceMeta } from "./session-meta.js";
import { IMAGE_FORMAT, imageHeader } from "./image-header.js";
import { chatErrorAction, durationSince, type ChatModel, type Json, type SessionModel, type SessionRoute } from "./model.js";
import type { HostState } from "./state.js";

export const MAX_BATCH_SNAPSHOTS = 256;
export const MAX_RESOURCES = 4096;
export const IDENTITY_IMAGE_BYTES = 256 * 1024;
export const IDENTITY_IMAGE_PIXELS = 1024;

const id = z.string().min(1).max(MAX_ID_LEN);
const iso = z.string().max(64);
function turnSchema(max: number) {
  return z.object({
    id,
    startedAt: iso.optional(),
    userText: z.string().max(max),
    responseText: z.string().max(max).optional(),
    reasoningText: z.string().max(max).optional(),
    cancelled: z.boolean().optional(),
    error: z.string().max(65536).optional(),
  }).strict();
}
const SourceTurn = turnSchema(MAX_TEXT);
const LargeSourceTurn = turnSchema(Number.MAX_SAFE_INTEGER);
type SourceTurn = z.infer<typeof SourceTurn>;
const snapshotFields = { sourceId: id, active: z.boolean(), historyOnly: z.boolean() };
const SourceTurnEvent = z.object({ type: z.literal("source_turn"), ...snapshotFields, turn: SourceTurn }).strict();
const BatchSnapshot = z.object({ ...snapshotFields, chat: z.string().max(MAX_ID_LEN).optional(), turn: SourceTurn }).strict();
const SourceBatch = z.object({
  type: z.literal("source_snapshot_batch"),
  session: z.string().max(MAX_ID_LEN),
  backendConnectionId: z.string().max(MAX_ID_LEN).optional(),
  batchId: id,
  snapshots: z.array(BatchSnapshot).min(1).max(MAX_BATCH_SNAPSHOTS),
}).strict();
const Resource = z.object({ session: z.string().max(MAX_ID_LEN), index: z.number().int().min(0), mimeType: z.literal("text/plain"), digest: z.string().regex(/^sha256:[0-9a-f]{64}$/), text: z.string() }).strict();
const ResourcesEvent = z.object({ type: z.literal("source_turn_resources"), ...snapshotFields, resources: z.array(Resource).min(1).max(MAX_RESOURCES) }).strict();
const DecodedSnapshot = z.object({ ...snapshotFields, turn: LargeSourceTurn }).strict();
const Image = z.object({ mimeType: z.enum(["image/png", "image/jpeg", "image/webp", "image/gif"]), data: z.string().max(Math.ceil(IDENTITY_IMAGE_BYTES / 3) * 4 + 4), width: z.number().int().min(1).max(IDENTITY_IMAGE_PIXELS), height: z.number().int().min(1).max(IDENTITY_IMAGE_PIXELS) }).strict();
const ProfileImageEvent = z.object({ type: z.literal("profile_image_changed"), image: Image.nullable() }).strict();

interface Snapshot {
  sourceId: string;
  active: boolean;
  historyOnly: boolean;
  turn: SourceTurn;
}

/** `registered.sourceCursors` (v11): the last held turn of every chat with one, by chat URI. */
export function sourceCursors(s: SessionModel): Json {
  const out: Json = {};
  for (const c of s.chats.values()) {
    const last = c.turns[c.turns.length - 1];
    if (last) out[c.uri] = last.id;
  }
  return out;
}

function textOf(parts: Json[], kind: string): string {
  let t = "";
  for (const p of parts) if (p.kind === kind && typeof p.content === "string") t += p.content;
  return t;
}

/** Publish what the snapshot adds to the live turn's `kind` text; an error when it does not extend it. */
function extend(st: HostState, c: ChatModel, kind: "markdown" | "reasoning", full: string | undefined): string | null {
  const t = c.activeTurn!;
  const held = textOf(t.responseParts, kind);
  const next = full ?? "";
  if (!next.startsWith(held)) return `snapshot ${kind} text does not extend the live transcript of turn ${clip(t.id)}`;
  const add = next.slice(held.length);
  if (add === "") return null;
  const last = t.responseParts[t.responseParts.length - 1];
  if (last && last.kind === kind) st.publish(c.uri, { type: kind === "markdown" ? "chat/delta" : "chat/reasoning", turnId: t.id, partId: last.id, content: add });
  else st.publish(c.uri, { type: "chat/responsePart", turnId: t.id, part: { kind, id: `p${++c.partSeq}`, content: add } });
  return null;
}

function close(st: HostState, s: SessionModel, c: ChatModel, turn: SourceTurn): void {
  const t = c.activeTurn!;
  // The turn's input requests leave with it (its response parts are retired by the reducer).
  for (const [rid, tid] of c.inputTurns) {
    const key = `input:${c.uri}:${rid}`;
    if (tid === t.id && s.inputNeeded.has(key)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
  }
  const duration = durationSince(t);
  if (turn.error !== undefined) st.publish(c.uri, chatErrorAction(t.id, duration, "backend_error", turn.error));
  else if (turn.cancelled) st.publish(c.uri, { type: "chat/turnCancelled", turnId: t.id, duration });
  else st.publish(c.uri, { type: "chat/turnComplete", turnId: t.id, duration });
}

/** Apply one validated snapshot to `c`; null on success, else why it was refused (nothing published). */
export function applySnapshot(st: HostState, s: SessionModel, c: ChatModel, snap: Snapshot): string | null {
  if (snap.sourceId !== s.sourceId) return "source identity mismatch: the snapshot names a different source than this registration";
  if (snap.historyOnly && snap.active) return "a history-only snapshot cannot be active";
  const turn = snap.turn;
  const live = c.activeTurn;
  if (c.turns.some((x) => x.id === turn.id)) return snap.active ? `turn ${clip(turn.id)} is already closed` : null; // held turns are immutable
  if (live && live.id === turn.id) {
    if (snap.historyOnly) return `turn ${clip(turn.id)} is live; a history-only snapshot cannot close it`;
    const err = checkExtends(live.responseParts, turn);
    if (err) return err;
    extend(st, c, "reasoning", turn.reasoningText);
    extend(st, c, "markdown", turn.responseText);
    if (!snap.active) close(st, s, c, turn);
    st.summaryChanged(s);
    return null;
  }
  if (live) return `turn ${clip(live.id)} is live; turn ${clip(turn.id)} cannot be placed before it settles`;
  // A new turn: published whole (closed) or started with its content so far (active).
  const startedAt = turn.startedAt !== undefined && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(turn.startedAt) ? turn.startedAt : new Date().toISOString();
  st.publish(c.uri, { type: "chat/turnStarted", turnId: turn.id, startedAt, message: { text: turn.userText, origin: { kind: "user" } } });
  extend(st, c, "reasoning", turn.reasoningText);
  extend(st, c, "markdown", turn.responseText);
  if (!snap.active) close(st, s, c, turn);
  st.summaryChanged(s);
  return null;
}

function checkExtends(parts: Json[], turn: SourceTurn): string | null {
  if (!(turn.responseText ?? "").startsWith(textOf(parts, "markdown"))) return `snapshot text does not extend the live transcript of turn ${clip(turn.id)}`;
  if (!(turn.reasoningText ?? "").startsWith(textOf(parts, "reasoning"))) return `snapshot reasoning does not extend the live transcript of turn ${clip(turn.id)}`;
  return null;
}

/**
 * A restored live turn's text from the registering backend's own ended record of it (a `hello.history` turn with the
 * live turn's ID): what it adds past the held text is published, as a v11 snapshot extends the live turn. Nothing is
 * published when it does not extend what the host holds (the host then keeps its own, longer, text). A text the
 * record leaves out (Berth's history states no reasoning) says nothing about the held one, which stays as it is.
 */
export function extendLiveFromRecord(st: HostState, c: ChatModel, turn: { id: string; responseText?: string | undefined; reasoningText?: string | undefined }): void {
  const t = c.activeTurn;
  if (!t || t.id !== turn.id) return;
  const texts = { reasoning: turn.reasoningText, markdown: turn.responseText } as const;
  for (const kind of ["reasoning", "markdown"] as const) {
    const full = texts[kind];
    if (full !== undefined && full.startsWith(textOf(t.responseParts, kind))) extend(st, c, kind, full);
  }
}

/** v11 `source_turn`, v13 `source_turn_resources`, v14 `profile_image_changed`. */
export function applySourceEvent(st: HostState, s: SessionModel, c: ChatModel, raw: Json): string | null {
  switch (raw.type) {
    case "source_turn": {
      const p = SourceTurnEvent.safeParse(raw);
      return p.success ? applySnapshot(st, s, c, p.data) : zodMessage(p.error);
    }
    case "source_turn_resources": {
      const p = ResourcesEvent.safeParse(raw);
      if (!p.success) return zodMessage(p.error);
      const decoded = decodeResources(s, p.data.resources, st.sessionContentQuota);
      if (typeof decoded === "string") return decoded;
      const e = p.data;
      if (decoded.sourceId !== e.sourceId || decoded.active !== e.active || decoded.historyOnly !== e.historyOnly) return "the resource envelope does not match the decoded snapshot";
      return applySnapshot(st, s, c, decoded);
    }
    case "profile_image_changed": {
      const p = ProfileImageEvent.safeParse(raw);
      if (!p.success) return zodMessage(p.error);
      return setIdentityImage(st, s, p.data.image);
    }
    default:
      return `unknown event type ${clip(raw.type)}`;
  }
}

/**
 * The resources' snapshot, checked. With an operator-set session content quota (bytes), the decoded
 * snapshot's UTF-8 size may reach the quota but not exceed it; without one only the frame bounds it.
 */
function decodeResources(s: SessionModel, resources: Array<z.infer<typeof Resource>>, quota?: number): Snapshot | string {
  const ordered = [...resources].sort((a, b) => a.index - b.index);
  let text = "";
  let bytes = 0;
  for (let i = 0; i < ordered.length; i++) {
    const r = ordered[i]!;
    if (r.index !== i) return `resource indexes must be 0..${ordered.length - 1} without gaps or repeats`;
    if (r.session !== s.uri) return `resource ${i} belongs to another session`;
    bytes += Buffer.byteLength(r.text, "utf8");
    if (quota !== undefined && bytes > quota) return `the decoded snapshot exceeds this host's session content quota of ${quota} bytes (set by the operator with --session-content-quota); send it when the quota allows`;
    if (`sha256:${createHash("sha256").update(r.text, "utf8").digest("hex")}` !== r.digest) return `resource ${i} does not match its digest`;
    text += r.text;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return "the resources do not decode to a JSON snapshot";
  }
  const p = DecodedSnapshot.safeParse(json);
  return p.success ? p.data : `decoded snapshot: ${zodMessage(p.error)}`;
}

/** v12: apply snapshots in order, commit the accepted prefix, then acknowledge it. */
export function applySourceBatch(st: HostState, route: SessionRoute, s: SessionModel, f: Json): Json {
  const batchId = typeof f.batchId === "string" ? f.batchId.slice(0, MAX_ID_LEN) : null;
  const ack = (x: Json): Json => ({ type: "source_snapshot_batch_ack", session: s.uri, batchId, backendConnectionId: route.logicalId, ...x });
  if (route.version < 12) return ack({ accepted: 0, total: 0, error: "source_snapshot_batch requires protocol version 12" });
  const p = SourceBatch.safeParse(f);
  if (!p.success) return ack({ accepted: 0, total: Array.isArray(f.snapshots) ? f.snapshots.length : 0, error: zodMessage(p.error) });
  const snaps = p.data.snapshots;
  let accepted = 0;
  let lastTurnId: string | undefined;
  let error: string | undefined;
  for (const snap of snaps) {
    const c = st.chatIndex.get(snap.chat ?? s.primaryChat);
    const err = !c || c.sessionUri !== s.uri ? "chat does not belong to the session" : applySnapshot(st, s, c, snap);
    if (err) {
      error = `snapshot ${accepted}: ${err}`;
      break;
    }
    accepted++;
    lastTurnId = snap.turn.id;
  }
  st.store.flush(); // the acknowledged prefix is durable before the backend hears of it
  return ack({ accepted, total: snaps.length, ...(lastTurnId !== undefined ? { lastTurnId } : {}), ...(error !== undefined ? { error } : {}) });
}

function setIdentityImage(st: HostState, s: SessionModel, image: z.infer<typeof Image> | null): string | null {
  if (image === null) {
    if (!s.extra.identityImage) return null;
    delete s.extra.identityImage;
  } else {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(image.data) || image.data.length % 4 !== 0) return "image.data must be base64";
    const bytes = Buffer.from(image.data, "base64");
    if (bytes.length === 0 || bytes.length > IDENTITY_IMAGE_BYTES) return `image must be 1..${IDENTITY_IMAGE_BYTES} bytes`;
    const stated = imageHeader(image.mimeType, bytes);
    if (typeof stated === "string") return `image bytes are not ${image.mimeType}: ${stated}`;
    if (stated.width !== image.width || stated.height !== image.height)
      return `image width/height (${image.width}x${image.height}) do not match the ${IMAGE_FORMAT[image.mimeType]!} header (${stated.width}x${stated.height})`;
    s.extra.identityImage = { mimeType: image.mimeType, width: image.width, height: image.height, data: image.data };
  }
  st.persistSession(s);
  st.store.flush(); // durable before the sequenced acknowledgement
  announceMeta(st, s, false);
  return null;
}
