/**
 * The lease of a claim around the card network (ARCHITECTURE.md "Network I/O never happens while
 * rows are locked"; the claims themselves: src/engine/network-claims.ts).
 */

/**
 * How long a claim holds before another call may take it over. Far above any network call's
 * timeout, so a live claimer is never overtaken; short enough that a buyer retrying after a crash
 * is not kept waiting long.
 */
export const NETWORK_CLAIM_LEASE_MS = 60_000;
