/**
 * Claims on a row whose outcome waits for the card network (ARCHITECTURE.md "Network I/O never
 * happens while rows are locked"): an operation claims the row in a short transaction (a
 * `processing` status stamped with the claim's instant), calls the network with no transaction
 * open, then records the outcome only while its claim still holds (the stamp unchanged). A claim
 * whose process died is taken over once it is older than the lease. Pure: instants are arguments.
 */

/**
 * How long a claim holds before another call may take it over. Far above any network call's
 * timeout, so a live claimer is never overtaken; short enough that a buyer retrying after a crash
 * is not kept waiting long.
 */
export const NETWORK_CLAIM_LEASE_MS = 60_000;

/** True once a claim stamped `claimedAt` may be taken over at `now`. */
export function claimLapsed(claimedAt: Date, now: Date): boolean {
  return claimedAt.getTime() + NETWORK_CLAIM_LEASE_MS <= now.getTime();
}
