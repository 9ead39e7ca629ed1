/**
 * Backend protocol v6 auxiliary resources: changeset and annotations channels (spec "Events": `resource_snapshot`,
 * `resource_action`; "Commands": `invoke_changeset_operation`). Contracts:
 *  - a changeset resource is confined to its session: `ahp-changeset:/<session id>/<path>`; only
 *    the route currently owning that session may snapshot or change it;
 *  - `resource_snapshot` creates the channel or replaces its state; subscribers of an existing
 *    channel are brought to the new state with official `changeset/*` actions;
 *  - `resource_action` on a changeset applies the official changeset reducer before publishing;
 *    `session/changesetsChanged` replaces the session's catalogue;
 *  - `invokeChangesetOperation` is validated against the changeset's current operations and scopes before
 *    `invoke_changeset_operation` is sent; a refusal or an indeterminate outcome is an error, never retried;
 *  - at most 64 changesets per session, each at most 4 MiB encoded; one annotations channel per
 *    session (`<session>/annotations`), at most 4 MiB, every annotation keeping an entry;
 *  - changesets, annotations and the changeset catalogue survive a host restart: each change
 *    queues one write of the resource's whole state (the host database's `resources` table),
 *    committed with the batch; stored rows are re-validated when first read.
 */
import { z } from "zod";
import { ErrorCodes, ROOT } from "./ahp-constants.js";
import { RpcError } from "./ahp-requests.js";
import { clip } from "./inbound.js";
import type { CommandOutcome, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { matchesUriTemplate } from "./uri-template.js";
import { NOT_CONNECTED_REFUSAL, hostRefused, refusal } from "./commands.js";

export const MAX_CHANGESETS_PER_SESSION = 64;
export const MAX_CHANGESET_BYTES = 4 * 1024 * 1024;
const MIN_VERSION = 6;

const ErrorInfo = z.object({ errorType: z.string().max(256), message: z.string().max(65536) }).passthrough();
const File = z.object({ id: z.string().min(1).max(4096), edit: z.record(z.string(), z.unknown()), reviewed: z.boolean().optional(), _meta: z.record(z.string(), z.unknown()).optional() }).passthrough();
const Operation = z.object({
  id: z.string().min(1).max(512),
  label: z.string().max(4096),
  scopes: z.array(z.enum(["changeset", "resource", "range"])).min(1),
  status: z.enum(["idle", "running", "error", "disabled"]),
  error: ErrorInfo.optional(),
}).passthrough();
const Status = z.enum(["computing", "ready", "error"]);
const ChangesetState = z.object({ status: Status, error: ErrorInfo.optional(), files: z.array(File), operations: z.array(Operation).optional() }).strict();
type ChangesetState = z.infer<typeof ChangesetState>;
const Catalogue = z.array(z.object({ label: z.string().max(4096), uriTemplate: z.string().min(1).max(4096), changeKind: z.string().max(256), description: z.string().max(4096).optional() }).passthrough()).max(MAX_CHANGESETS_PER_SESSION);

const ChangesetAction = z.discriminatedUnion("type", [
  z.object({ type: z.literal("changeset/statusChanged"), status: Status, error: ErrorInfo.optional() }),
  z.object({ type: z.literal("changeset/fileSet"), file: File }),
  z.object({ type: z.literal("changeset/fileRemoved"), fileId: z.string() }),
  z.object({ type: z.literal("changeset/contentChanged"), files: z.array(File), operations: z.array(Operation).optional(), error: ErrorInfo.optional() }),
  z.object({ type: z.literal("changeset/operationsChanged"), operations: z.array(Operation).optional() }),
  z.object({ type: z.literal("changeset/operationStatusChanged"), operationId: z.string(), status: Operation.shape.status, error: ErrorInfo.optional() }),
  z.object({ type: z.literal("changeset/cleared") }),
  z.object({ type: z.literal("changeset/filesReviewChanged"), files: z.array(z.string().max(4096)).max(10_000), reviewed: z.boolean() }).strict(),
]);
type ChangesetAction = z.infer<typeof ChangesetAction>;

/** A copy of `o` without the optional key `k` (a field the reducer clears). */
function without<T extends object>(o: T, k: keyof T): T {
  const c = { ...o };
  delete c[k];
  return c;
}

/** The official changeset reducer (AHP `channels-changeset/reducer.ts` semantics). */
export function reduceChangeset(state: ChangesetState, a: ChangesetAction): ChangesetState {
  switch (a.type) {
    case "changeset/statusChanged": {
      const rest = without(state, "error");
      return a.status === "error" ? { ...rest, status: a.status, ...(a.error ? { error: a.error } : {}) } : { ...rest, status: a.status };
    }
    case "changeset/fileSet": {
      const i = state.files.findIndex((f) => f.id === a.file.id);
      const files = [...state.files];
      if (i < 0) files.push(a.file);
      else files[i] = a.file;
      return { ...state, files };
    }
    case "changeset/fileRemoved":
      return { ...state, files: state.files.filter((f) => f.id !== a.fileId) };
    case "changeset/contentChanged": {
      const rest = without(state, "error");
      return { ...rest, files: a.files, ...(a.operations !== undefined ? { operations: a.operations } : {}), ...(a.error !== undefined ? { error: a.error } : {}) };
    }
    case "changeset/operationsChanged": {
      const rest = without(state, "operations");
      return a.operations === undefined ? rest : { ...rest, operations: a.operations };
    }
    case "changeset/operationStatusChanged": {
      if (!state.operations) return state;
      const operations = state.operations.map((o) => {
        if (o.id !== a.operationId) return o;
        const rest = without(o, "error");
        return a.status === "error" ? { ...rest, status: a.status, ...(a.error ? { error: a.error } : {}) } : { ...rest, status: a.status };
      });
      return { ...state, operations };
    }
    case "changeset/cleared":
      return { ...state, files: [] };
    case "changeset/filesReviewChanged": {
      const ids = new Set(a.files);
      return { ...state, files: state.files.map((f) => (ids.has(f.id) ? { ...f, reviewed: a.reviewed } : f)) };
    }
  }
}

// ── Annotations (`<session>/annotations`, AHP channels-annotations) ──────────
const Entry = z.object({ id: z.string().min(1).max(512), text: z.union([z.string().max(65536), z.object({ markdown: z.string().max(65536) }).strict()]), _meta: z.record(z.string(), z.unknown()).optional() }).strict();
const Annotation = z.object({
  id: z.string().min(1).max(512),
  turnId: z.string().min(1).max(512),
  resource: z.string().min(1).max(4096),
  range: TextRangeShape().optional(),
  resolved: z.boolean(),
  entries: z.array(Entry).min(1),
  _meta: z.record(z.string(), z.unknown()).optional(),
}).strict();
const AnnotationsState = z.object({ annotations: z.array(Annotation) }).strict();
type AnnotationsState = z.infer<typeof AnnotationsState>;
const AnnotationsAction = z.discriminatedUnion("type", [
  z.object({ type: z.literal("annotations/set"), annotation: Annotation }).strict(),
  z.object({ type: z.literal("annotations/removed"), annotationId: z.string() }).strict(),
  z.object({ type: z.literal("annotations/updated"), annotationId: z.string(), resource: z.string().min(1).max(4096).optional(), range: TextRangeShape().optional(), resolved: z.boolean().optional() }).strict(),
  z.object({ type: z.literal("annotations/entrySet"), annotationId: z.string(), entry: Entry }).strict(),
  z.object({ type: z.literal("annotations/entryRemoved"), annotationId: z.string(), entryId: z.string() }).strict(),
]);
type AnnotationsAction = z.infer<typeof AnnotationsAction>;
function TextRangeShape() {
  const pos = z.object({ line: z.number().int().min(0), character: z.number().int().min(0) });
  return z.object({ start: pos, end: pos }).passthrough();
}

/** The annotations reducer (AHP channels-annotations action semantics; unknown ids are no-ops). */
export function reduceAnnotations(state: AnnotationsState, a: AnnotationsAction): AnnotationsState {
  const list = state.annotations;
  switch (a.type) {
    case "annotations/set": {
      const i = list.findIndex((x) => x.id === a.annotation.id);
      const annotations = [...list];
      if (i < 0) annotations.push(a.annotation);
      else annotations[i] = a.annotation;
      return { annotations };
    }
    case "annotations/removed":
      return { annotations: list.filter((x) => x.id !== a.annotationId) };
    case "annotations/updated":
      return {
        annotations: list.map((x) =>
          x.id !== a.annotationId ? x : { ...x, ...(a.resource !== undefined ? { resource: a.resource } : {}), ...(a.range !== undefined ? { range: a.range } : {}), ...(a.resolved !== undefined ? { resolved: a.resolved } : {}) },
        ),
      };
    case "annotations/entrySet":
      return {
        annotations: list.map((x) => {
          if (x.id !== a.annotationId) return x;
          const i = x.entries.findIndex((e) => e.id === a.entry.id);
          const entries = [...x.entries];
          if (i < 0) entries.push(a.entry);
          else entries[i] = a.entry;
          return { ...x, entries };
        }),
      };
    case "annotations/entryRemoved":
      return { annotations: list.map((x) => (x.id !== a.annotationId ? x : { ...x, entries: x.entries.filter((e) => e.id !== a.entryId) })) };
  }
}

interface SessionResources {
  changesets: Map<string, ChangesetState>;
  annotations?: AnnotationsState;
  catalogue?: Json[];
}
const all = new WeakMap<HostState, Map<string, SessionResources>>();
function of(st: HostState, sessionUri: string, create: boolean): SessionResources | undefined {
  let m = all.get(st);
  if (!m) all.set(st, (m = restore(st)));
  let r = m.get(sessionUri);
  if (!r && create) m.set(sessionUri, (r = { changesets: new Map() }));
  return r;
}

// ── Persistence (the host database's `resources` table) ──────────────────────
/** The row key of a session's changeset catalogue (`SessionState.changesets`). */
const catalogueKey = (sessionUri: string): string => `${sessionUri}#changesets`;
const StoredCatalogue = Catalogue;

/**
 * The resources an earlier run stored, read once (on first use) and checked against the same
 * schemas as the wire: a row that no longer parses, or whose session is gone, is dropped and
 * counted in the log, never trusted.
 */
function restore(st: HostState): Map<string, SessionResources> {
  const m = new Map<string, SessionResources>();
  let bad = 0;
  let rows: ReturnType<typeof st.store.loadResources>;
  try {
    rows = st.store.loadResources();
  } catch (e) {
    st.log(`resources: could not read the stored resources (${e instanceof Error ? e.message : String(e)}); serving none until backends resend them`);
    return m;
  }
  for (const row of rows) {
    const s = st.sessions.get(row.sessionUri);
    let state: unknown;
    try {
      state = JSON.parse(row.state);
    } catch {
      state = undefined;
    }
    let r = m.get(row.sessionUri);
    const slot = (): SessionResources => {
      if (!r) m.set(row.sessionUri, (r = { changesets: new Map() }));
      return r;
    };
    if (!s) {
      bad++;
      continue;
    }
    if (row.kind === "changeset" && sessionOfChangeset(st, row.uri) === s) {
      const p = ChangesetState.safeParse(state);
      if (p.success) {
        slot().changesets.set(row.uri, p.data);
        continue;
      }
    } else if (row.kind === "annotations" && row.uri === `${s.uri}/annotations`) {
      const p = AnnotationsState.safeParse(state);
      if (p.success) {
        slot().annotations = p.data;
        continue;
      }
    } else if (row.kind === "catalogue" && row.uri === catalogueKey(s.uri)) {
      const p = StoredCatalogue.safeParse(state);
      if (p.success) {
        slot().catalogue = p.data;
        continue;
      }
    }
    bad++;
  }
  if (bad > 0) st.log(`resources: ${bad} stored resource(s) unreadable or orphaned; ignored`);
  return m;
}

/** The latest queued write of each resource (a change number): only that one writes. */
const latest = new WeakMap<HostState, Map<string, number>>();
let changeNo = 0;
/**
 * Queue the durable write of one resource of session `sessionUri`; its current state is read when
 * the batch commits, and only the resource's last queued write in a batch writes, so a burst costs
 * one write. Changesets and annotations hold no secret (a credential never enters them).
 */
function save(st: HostState, sessionUri: string, kind: "changeset" | "annotations" | "catalogue", uri: string): void {
  let m = latest.get(st);
  if (!m) latest.set(st, (m = new Map<string, number>()));
  const n = ++changeNo;
  m.set(uri, n);
  st.store.putResource(() => {
    if (m.get(uri) !== n) return undefined; // a later change in this batch writes it
    m.delete(uri);
    const r = all.get(st)?.get(sessionUri);
    const state = kind === "changeset" ? r?.changesets.get(uri) : kind === "annotations" ? r?.annotations : r?.catalogue;
    return state === undefined ? undefined : { uri, sessionUri, kind, state: JSON.stringify(state) };
  });
}

/** `ahp-changeset:/<session id>/` — the prefix every changeset of a session must have. */
export function changesetPrefix(sessionUri: string): string {
  return `ahp-changeset:/${sessionUri.slice("ahp-session:/".length)}/`;
}
const sessionOfChangeset = (st: HostState, uri: string): SessionModel | undefined => {
  const m = /^ahp-changeset:\/([A-Za-z0-9._~-]{1,128})\/[A-Za-z0-9._~/-]{1,256}$/.exec(uri);
  return m ? st.sessions.get(`ahp-session:/${m[1]}`) : undefined;
};

/** Snapshot of a changeset or annotations channel, or undefined when `uri` is none. */
export function resourceSnapshot(st: HostState, uri: string): Json | undefined {
  if (uri.endsWith("/annotations") && uri.startsWith("ahp-session:/")) {
    const s = st.sessions.get(uri.slice(0, -"/annotations".length));
    const state = s ? of(st, s.uri, false)?.annotations : undefined;
    return state ? { resource: uri, state, fromSeq: st.serverSeq } : undefined;
  }
  if (!uri.startsWith("ahp-changeset:")) return undefined;
  const s = sessionOfChangeset(st, uri);
  const state = s ? of(st, s.uri, false)?.changesets.get(uri) : undefined;
  return state ? { resource: uri, state, fromSeq: st.serverSeq } : undefined;
}

/** The session's changeset catalogue (`SessionState.changesets`), when the backend gave one. */
export function sessionChangesets(st: HostState, s: SessionModel): Json[] | undefined {
  return of(st, s.uri, false)?.catalogue;
}

/**
 * AHP `AnnotationsSummary` for `SessionState.annotations` / `SessionSummary.annotations`: the
 * channel and its annotation and entry counts; undefined while the session has no annotations channel.
 */
export function sessionAnnotationsSummary(st: HostState, s: SessionModel): Json | undefined {
  const a = of(st, s.uri, false)?.annotations;
  if (!a) return undefined;
  return { resource: `${s.uri}/annotations`, annotationCount: a.annotations.length, entryCount: a.annotations.reduce((n, x) => n + x.entries.length, 0) };
}
/** Tell root subscribers when a change moved the session's annotation counts. */
function annotationsSummaryChanged(st: HostState, s: SessionModel, before: Json | undefined): void {
  const after = sessionAnnotationsSummary(st, s);
  if (after && JSON.stringify(after) !== JSON.stringify(before)) st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { annotations: after } });
}

/** The changeset and annotations channels session `uri` has now (what its removal removes). */
export function sessionResourceChannels(st: HostState, uri: string): string[] {
  const r = of(st, uri, false);
  return r ? [...r.changesets.keys(), ...(r.annotations ? [`${uri}/annotations`] : [])] : [];
}

export function sessionResourcesRemoved(st: HostState, uri: string): void {
  all.get(st)?.delete(uri);
}

/** A v6 `resource_snapshot` event for session `s`; null, or a semantic-rejection message. */
export function resourceSnapshotEvent(st: HostState, s: SessionModel, raw: Json): string | null {
  if (raw.kind === "annotations") return annotationsSnapshot(st, s, raw);
  if (raw.kind !== "changeset") return "resource_snapshot kind must be changeset or annotations";
  const uri = raw.resource;
  if (typeof uri !== "string" || !uri.startsWith(changesetPrefix(s.uri)) || sessionOfChangeset(st, uri) !== s)
    return `changeset resources of this session are ${changesetPrefix(s.uri)}<path>`;
  const p = ChangesetState.safeParse(raw.state);
  if (!p.success) return `invalid changeset state: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim();
  if (Buffer.byteLength(JSON.stringify(p.data)) > MAX_CHANGESET_BYTES) return "changeset state exceeds 4 MiB";
  const r = of(st, s.uri, true)!;
  const prev = r.changesets.get(uri);
  if (!prev && r.changesets.size >= MAX_CHANGESETS_PER_SESSION) return `a session holds at most ${MAX_CHANGESETS_PER_SESSION} changesets`;
  const next = p.data;
  r.changesets.set(uri, next);
  save(st, s.uri, "changeset", uri);
  if (prev) {
    // Bring existing subscribers to the replacement with official actions.
    if (prev.status !== next.status || prev.error !== undefined || next.error !== undefined) st.publish(uri, { type: "changeset/statusChanged", status: next.status, ...(next.error ? { error: next.error } : {}) });
    st.publish(uri, { type: "changeset/contentChanged", files: next.files, ...(next.operations ? { operations: next.operations } : {}), ...(next.error ? { error: next.error } : {}) });
    if (prev.operations && !next.operations) st.publish(uri, { type: "changeset/operationsChanged" });
  }
  return null;
}

function annotationsSnapshot(st: HostState, s: SessionModel, raw: Json): string | null {
  if (raw.resource !== `${s.uri}/annotations`) return `the annotations resource of this session is ${s.uri}/annotations`;
  const p = AnnotationsState.safeParse(raw.state);
  if (!p.success) return `invalid annotations state: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim();
  if (Buffer.byteLength(JSON.stringify(p.data)) > MAX_CHANGESET_BYTES) return "annotations state exceeds 4 MiB";
  const r = of(st, s.uri, true)!;
  const prev = r.annotations;
  const before = sessionAnnotationsSummary(st, s);
  r.annotations = p.data;
  save(st, s.uri, "annotations", `${s.uri}/annotations`);
  annotationsSummaryChanged(st, s, before);
  if (prev) {
    // Bring existing subscribers to the replacement with official actions.
    const uri = `${s.uri}/annotations`;
    const keep = new Set(p.data.annotations.map((a) => a.id));
    for (const a of prev.annotations) if (!keep.has(a.id)) st.publish(uri, { type: "annotations/removed", annotationId: a.id });
    for (const a of p.data.annotations) st.publish(uri, { type: "annotations/set", annotation: a });
  }
  return null;
}

/** A v6 `resource_action` that is not an MCP action; null, or a semantic-rejection message. */
export function changesetResourceAction(st: HostState, s: SessionModel, channel: string, action: Json): string | null {
  if (channel === s.uri) {
    if (action.type !== "session/changesetsChanged") return `resource_action ${clip(action.type)} is not projected by this host`;
    const p = Catalogue.safeParse(action.changesets);
    if (!p.success) return "invalid session/changesetsChanged";
    of(st, s.uri, true)!.catalogue = p.data;
    save(st, s.uri, "catalogue", catalogueKey(s.uri));
    st.publish(s.uri, { type: "session/changesetsChanged", changesets: p.data });
    return null;
  }
  if (channel === `${s.uri}/annotations`) {
    const cur = of(st, s.uri, false)?.annotations;
    if (!cur) return "no annotations channel: send its resource_snapshot first";
    const p = AnnotationsAction.safeParse(action);
    if (!p.success) return `invalid ${clip(action.type)}: ${p.error.issues[0]?.message ?? "invalid"}`;
    const next = reduceAnnotations(cur, p.data);
    if (next.annotations.some((a) => a.entries.length === 0)) return "an annotation must keep at least one entry (remove the annotation instead)";
    const before = sessionAnnotationsSummary(st, s);
    of(st, s.uri, true)!.annotations = next;
    save(st, s.uri, "annotations", channel);
    st.publish(channel, p.data);
    annotationsSummaryChanged(st, s, before);
    return null;
  }
  if (sessionOfChangeset(st, channel) !== s) return "resource_action channel is not owned by this session";
  const cur = of(st, s.uri, false)?.changesets.get(channel);
  if (!cur) return "unknown changeset: send its resource_snapshot first";
  const p = ChangesetAction.safeParse(action);
  if (!p.success) return `invalid ${clip(action.type)}: ${p.error.issues[0]?.message ?? "invalid"}`;
  of(st, s.uri, true)!.changesets.set(channel, reduceChangeset(cur, p.data));
  save(st, s.uri, "changeset", channel);
  st.publish(channel, p.data);
  return null;
}

/** Whether the session's catalogue declares the review capability for this changeset URI. */
function reviewable(st: HostState, s: SessionModel, uri: string): boolean {
  for (const c of of(st, s.uri, false)?.catalogue ?? []) {
    const caps = c.capabilities as Json | undefined;
    if (!caps || typeof caps.review !== "object" || caps.review === null) continue;
    if (matchesUriTemplate(String(c.uriTemplate), uri)) return true;
  }
  return false;
}

/**
 * A client `changeset/filesReviewChanged` (the one client-dispatchable changeset action): sent as
 * `apply_resource_action`, reduced and echoed only after the backend accepts.
 */
export function changesetClientAction(st: HostState, channel: string, action: Json, origin: Origin, reject: (r: string) => void): void {
  const s = sessionOfChangeset(st, channel);
  const cs = s ? of(st, s.uri, false)?.changesets.get(channel) : undefined;
  if (!s || !cs) return; // upstream: an action for a non-existent channel is ignored
  if (action.type !== "changeset/filesReviewChanged") return reject(`${clip(action.type)} is not client-dispatchable`);
  const p = ChangesetAction.safeParse(action);
  if (!p.success) return reject("invalid changeset/filesReviewChanged");
  if (!reviewable(st, s, channel)) return reject("the changeset does not advertise the review capability");
  const route = s.route;
  if (!route || route.version < MIN_VERSION) return reject(NOT_CONNECTED_REFUSAL);
  st.sendCommand(route, { type: "command", backendInstanceId: route.instanceId, session: s.uri, command: { type: "apply_resource_action", channel, action: p.data } }, (o) => {
    if (o.kind !== "accepted") return reject(refusal(o, "backend refused the action"));
    const cur = of(st, s.uri, false)?.changesets.get(channel);
    if (!cur) return;
    of(st, s.uri, true)!.changesets.set(channel, reduceChangeset(cur, p.data));
    save(st, s.uri, "changeset", channel);
    st.publish(channel, p.data, origin);
  });
}

/**
 * A client annotation action on `<session>/annotations` (AHP: clients drive every annotation
 * mutation by dispatching `annotations/*` themselves). Validated against the official shapes and
 * the one-entry rule, sent as `apply_resource_action`, then reduced and echoed only after the
 * backend accepts; a refusal or an indeterminate outcome is the action's rejection.
 */
export function annotationsClientAction(st: HostState, channel: string, action: Json, origin: Origin, reject: (r: string) => void): void {
  const s = st.sessions.get(channel.slice(0, -"/annotations".length));
  if (!s || !of(st, s.uri, false)?.annotations) return; // upstream: an action for a non-existent channel is ignored
  const p = AnnotationsAction.safeParse(action);
  if (!p.success) return reject(`invalid ${clip(action.type)}: ${p.error.issues[0]?.message ?? "invalid"}`);
  const check = (): string | null => {
    const cur = of(st, s.uri, false)?.annotations;
    if (!cur) return "the annotations channel is gone";
    const next = reduceAnnotations(cur, p.data);
    if (next.annotations.some((a) => a.entries.length === 0)) return "an annotation must keep at least one entry (remove the annotation instead)";
    if (Buffer.byteLength(JSON.stringify(next)) > MAX_CHANGESET_BYTES) return "annotations state would exceed 4 MiB";
    return null;
  };
  const bad = check();
  if (bad) return reject(bad);
  const route = s.route;
  if (!route || route.version < MIN_VERSION) return reject(NOT_CONNECTED_REFUSAL);
  st.sendCommand(route, { type: "command", backendInstanceId: route.instanceId, session: s.uri, command: { type: "apply_resource_action", channel, action: p.data } }, (o) => {
    if (o.kind !== "accepted") return reject(refusal(o, "backend refused the action"));
    const stale = check(); // the channel may have changed while the command was out
    if (stale) return reject(stale);
    const before = sessionAnnotationsSummary(st, s);
    of(st, s.uri, true)!.annotations = reduceAnnotations(of(st, s.uri, false)!.annotations!, p.data);
    save(st, s.uri, "annotations", channel);
    st.publish(channel, p.data, origin);
    annotationsSummaryChanged(st, s, before);
  });
}

const TextRange = z.object({ start: z.object({ line: z.number().int().min(0), character: z.number().int().min(0) }), end: z.object({ line: z.number().int().min(0), character: z.number().int().min(0) }) }).passthrough();
const InvokeParams = z.object({
  channel: z.string(),
  operationId: z.string().min(1).max(512),
  target: z
    .discriminatedUnion("kind", [
      z.object({ kind: z.literal("resource"), resource: z.string().min(1).max(4096), side: z.enum(["before", "after"]).optional() }).strict(),
      z.object({ kind: z.literal("range"), resource: z.string().min(1).max(4096), side: z.enum(["before", "after"]).optional(), range: TextRange }).strict(),
    ])
    .optional(),
});

/** AHP `invokeChangesetOperation` → v6 `invoke_changeset_operation`. */
export async function invokeChangesetOperation(st: HostState, params: Json): Promise<Json> {
  const p = InvokeParams.safeParse(params);
  if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "invokeChangesetOperation needs channel, operationId and an optional typed target");
  const { channel, operationId, target } = p.data;
  const s = sessionOfChangeset(st, channel);
  const cs = s ? of(st, s.uri, false)?.changesets.get(channel) : undefined;
  if (!s || !cs) throw new RpcError(ErrorCodes.NotFound, "no such changeset");
  const op = cs.operations?.find((o) => o.id === operationId);
  if (!op) throw new RpcError(ErrorCodes.InvalidParams, "the changeset offers no operation with that id");
  if (op.status === "disabled" || op.status === "running") throw new RpcError(ErrorCodes.InvalidParams, `the operation is ${op.status}`);
  const scope = target?.kind ?? "changeset";
  if (!op.scopes.includes(scope)) throw new RpcError(ErrorCodes.InvalidParams, `the operation does not accept a ${scope} target`);
  const route = s.route;
  if (!route || route.version < MIN_VERSION) throw new RpcError(ErrorCodes.InternalError, "the changeset's backend is not connected; nothing was sent", { outcome: "rejected" });
  const command: Json = { type: "invoke_changeset_operation", operationId, resource: channel, ...(target ? { target } : {}) };
  const o = await new Promise<CommandOutcome>((done) => st.sendCommand(route, { type: "command", backendInstanceId: route.instanceId, session: s.uri, command }, done));
  if (o.kind === "accepted") return {};
  if (o.kind === "rejected") throw new RpcError(ErrorCodes.InternalError, o.notSent ? hostRefused(o.error) : "the backend refused the operation", { outcome: "rejected" });
  throw new RpcError(ErrorCodes.InternalError, "the operation's outcome is indeterminate; it is not retried", { outcome: "indeterminate" });
}
