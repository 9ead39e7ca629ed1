/**
 * Backend protocol v10, the managed invocation extension: the events a managed connector sends
 * (`invocation_*`), the bound on unresolved managed records, and the fixed visible copy of a
 * `source_observation_gap`. Schemas are the types (STYLE §4); the reduction is in
 * managed-events.ts, the AHP side in managed-actions.ts.
 */
import { z } from "zod";
import { MAX_ID_LEN, MAX_TEXT } from "./backend-schema.js";

const id = z.string().min(1).max(MAX_ID_LEN);

/** Unresolved managed records one session may hold; admission past it is refused (never evicted). */
export const MAX_UNRESOLVED_MANAGED = 64;

/** The spec's visible copy for a managed turn whose transcript continuity cannot be verified. */
export const OBSERVATION_GAP_MESSAGE = "Reply continuity could not be verified after reconnection. Received output was kept; your message was not resent.";

/** Opaque, bounded native binding a connector attaches to an invocation (echoed on `abort_invocation`). */
export const Binding = z.record(z.string().max(64), z.union([z.string().max(MAX_ID_LEN), z.number(), z.boolean(), z.null()])).refine((b) => Object.keys(b).length <= 16, "binding has at most 16 fields");

export const InvocationOutcome = z.object({
  type: z.literal("invocation_outcome"),
  commandId: id,
  target: z.object({ turnId: id.optional(), pendingId: id.optional() }).strict(),
  outcome: z.enum(["succeeded", "failed", "cancelled", "unknown"]),
  delivery: z.object({ state: z.enum(["delivered", "pending", "not_delivered", "unknown"]) }).strict().optional(),
  error: z.string().max(4096).optional(),
}).strict();

export const InvocationUserMessage = z.object({
  type: z.literal("invocation_user_message"),
  commandId: id,
  text: z.string().max(MAX_TEXT),
  turnId: id.optional(),
  binding: Binding.optional(),
}).strict();

export const InvocationBoundary = z.object({
  type: z.literal("invocation_boundary"),
  commandId: id,
  phase: z.enum(["entered", "retired"]),
  binding: Binding.optional(),
}).strict();

export const InvocationObservationCut = z.object({
  type: z.literal("invocation_observation_cut"),
  sourceEpoch: z.string().min(1).max(MAX_ID_LEN),
  service: z.string().max(MAX_ID_LEN).optional(),
  session: z.string().max(MAX_ID_LEN).optional(),
  generation: z.union([z.string().max(MAX_ID_LEN), z.number().int()]).optional(),
  /** The managed span still active at the cut (null or absent: none). */
  activeSpan: z.object({ commandId: id }).strict().nullable().optional(),
  /** True only when the source's validated context is idle; absent means false. */
  sourceIdle: z.boolean().optional(),
}).strict();

export const ManagedEvent = z.discriminatedUnion("type", [InvocationOutcome, InvocationUserMessage, InvocationBoundary, InvocationObservationCut]);
export type ManagedEvent = z.infer<typeof ManagedEvent>;
export type InvocationOutcome = z.infer<typeof InvocationOutcome>;
export type InvocationObservationCut = z.infer<typeof InvocationObservationCut>;

export const MANAGED_EVENT_TYPES: ReadonlySet<string> = new Set(["invocation_outcome", "invocation_user_message", "invocation_boundary", "invocation_observation_cut"]);
