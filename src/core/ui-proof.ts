/**
 * The web UI's check that the server it is about to hand the token to is the daemon that holds it.
 * Contract: before each WebSocket connection (the first and every reconnection) the page asks
 * `GET /ui-proof?nonce=N` (N: `UI_PROOF_NONCE` characters it drew at random) and opens the socket only when the
 * answer's `proof` equals HMAC-SHA-256 keyed with the token over `uiProofMessage(port, N)`, base64url without
 * padding. The port is the one the page was loaded from and the daemon listens on: a server another local user
 * started on that port after the daemon stopped cannot compute it, and cannot borrow it from the daemon restarted
 * on another port (whose answers name that port). Both sides build the message here; the HMAC is node:crypto's
 * on the daemon and WebCrypto's in the page.
 */

/** A nonce the daemon accepts: 16 to 128 base64url characters. */
export const UI_PROOF_NONCE = /^[A-Za-z0-9_-]{16,128}$/;

export function uiProofMessage(port: number, nonce: string): string {
  return `berth-ui-proof\n${port}\n${nonce}`;
}
