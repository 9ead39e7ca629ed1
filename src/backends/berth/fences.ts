/**
 * Which of the host's event refusals (`event_rejected`, `event_resync_required`, `event_epoch_mismatch`,
 * `event_epoch_required`) end a session's registration here, so that it registers again (spec "Sequenced
 * publication and logical failure isolation"). Only one that names the session's current registration
 * (`backendConnectionId` equal to its logical ID) does:
 *  - one naming an older ID answers an event of an epoch already replaced (sent before the replacement, answered
 *    late); the spec: "an old epoch's reply is [no] authority to retire a newer epoch";
 *  - one naming no ID is unattributable: the host answers that way only a sequenced event that omitted its ID
 *    (`event_epoch_required`) or a session with no current route on the connection. This backend names its
 *    registration on every event, so such a refusal never concerns the current one, and the spec denies "an
 *    unattributable validation error" the authority to retire a newer epoch too. (A legacy host that never echoes
 *    the ID is not one this backend speaks to: it needs provider protocol version 11.)
 *  - while the session has no current registration (a new one is in flight, or the connection is gone) there is
 *    nothing to end: the registration in flight, or the next connection's, gives it a fresh epoch.
 */
import type { Json } from "../../core/json-bounds.js";

/** Why refusal `f` does not end registration `current` of its session; undefined when it does. */
export function refusalIgnored(f: Json, current: string | undefined): string | undefined {
  const named = f.backendConnectionId;
  if (typeof named !== "string") return "it names no registration (unattributable)";
  if (current === undefined) return "the session has no current registration (one is in flight or the connection is gone)";
  if (named !== current) return "it names a registration already replaced";
  return undefined;
}
