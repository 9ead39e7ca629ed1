/**
 * Random opaque identifiers (prefix + 128 random bits, URL-safe base64) from node:crypto's CSPRNG.
 * Kept apart from ids.ts so the service's startup path does not load node:crypto.
 */
import { randomBytes } from "node:crypto";

export type IdSource = (prefix: string) => string;

export const randomId: IdSource = (prefix) => `${prefix}${randomBytes(16).toString("base64url")}`;
