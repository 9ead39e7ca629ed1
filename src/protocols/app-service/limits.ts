/**
 * The app-service v1 advertised limits. One object, advertised identically in
 * `initialize.payload.limits`, `initialize.payload.capabilities.limits` and `capabilities.payload.limits`,
 * and enforced by the same code that advertises it.
 */
export const LIMITS = Object.freeze({
  max_record_bytes: 65536,
  max_payload_bytes: 32768,
  max_error_message_bytes: 512,
  max_id_bytes: 128,
  max_name_bytes: 64,
  max_string_bytes: 16384,
  max_json_depth: 32,
  max_array_items: 64,
  max_object_fields: 64,
  max_negotiation_items: 8,
  max_session_attachments: 16,
  max_session_page_items: 32,
  max_session_replay_page_bytes: 16384,
  max_session_replay_window_bytes: 2097152,
  max_session_list_scan_entries: 20000,
  max_catalog_page_items: 32,
});

export type Limits = typeof LIMITS;

/** The JSON-shape bounds applied to every decoded request record (a subset of LIMITS). */
export type { JsonBounds } from "../../core/json-bounds.js";
import type { JsonBounds } from "../../core/json-bounds.js";

export const REQUEST_JSON_BOUNDS: JsonBounds = Object.freeze({
  maxDepth: LIMITS.max_json_depth,
  maxArrayItems: LIMITS.max_array_items,
  maxObjectFields: LIMITS.max_object_fields,
  maxStringBytes: LIMITS.max_string_bytes,
});
