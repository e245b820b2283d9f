/**
 * What one attempt at a job's slot ended in, as the scheduler reports it to its caller and to the
 * context's hooks (metrics). Apart from scheduler.ts and job.ts so that context.ts, which both of
 * them import, can name it without importing them back.
 */

/**
 * What a run reports: counts by name (renewed, failed, released, …). The ledger keeps, per slot,
 * the sum of what all its attempts committed (see SlotRun.recordBatch).
 */
export type JobCounts = Readonly<Record<string, number>>;

/**
 * What the claim found the slot in: `pending` (never run, or handed back at a stop), `failed`
 * (a retry), `lapsed` (its worker died: a take-over), `succeeded` (a replay), `abandoned` (a
 * re-run by hand); null for a slot abandoned without being claimed (its last worker died).
 */
export type ClaimedFrom = 'pending' | 'failed' | 'lapsed' | 'succeeded' | 'abandoned' | null;

export interface OutcomeBase {
  readonly job: string;
  readonly slot: Date;
  readonly attempt: number;
  readonly claimedFrom: ClaimedFrom;
  /**
   * What this attempt did: for a success, the job's own report; otherwise the batches it
   * committed before it stopped, failed or lost its claim.
   */
  readonly counts: JobCounts;
}

export type SlotOutcome =
  /** `slotCounts`: the ledger's counts of the slot, the sum over all its attempts. */
  | (OutcomeBase & { readonly status: 'succeeded'; readonly slotCounts: JobCounts })
  | (OutcomeBase & { readonly status: 'failed' | 'abandoned'; readonly error: string; readonly attemptsWithoutProgress: number })
  /**
   * The slot's run ended with account groups not done (slot-groups.ts: their worker node could not
   * be reached, or their work failed); every other group is done. The slot is retried at `retryAt`
   * like a failed one, taking only the pending groups.
   */
  | (OutcomeBase & { readonly status: 'partial'; readonly error: string; readonly pendingGroups: number; readonly pendingAccounts: number; readonly retryAt: Date; readonly attemptsWithoutProgress: number })
  /** `shared`: this worker took account groups of a slot another worker leads (counts: what it committed); the lead records the slot's outcome. */
  | (OutcomeBase & { readonly status: 'released' | 'lost' | 'shared' });
